# The fuzz targets and what each links, for both trees that build their sources:
# the clang fuzz tree (tests/fuzz/CMakeLists.txt) and the replay of their seeds and
# regressions in the ordinary test tree (tests/CMakeLists.txt).
set(DS_FUZZ_TARGETS wire config ingest)
set(DS_FUZZ_LINKS_wire ds_link)
set(DS_FUZZ_LINKS_config ds_mapping ds_export)
set(DS_FUZZ_LINKS_ingest ds_apply ds_mapping PkgConfig::ZSTD)

# fuzz_ingest_seeds: fuzz_ingest's seeds from the shared fixtures (tests/fuzz/run.sh).
add_executable(fuzz_ingest_seeds ${CMAKE_CURRENT_LIST_DIR}/ingest/ingest_seeds.c)
target_link_libraries(fuzz_ingest_seeds PRIVATE ds_base PkgConfig::JANSSON)
