# ctest -P script: build tests/common/link/fuzz/fuzz_wire.c with clang's libFuzzer (plus
# ASan/UBSan) against the wire decoder and run it for SECONDS seconds from the
# seed corpus. Any crash, leak or sanitizer report fails the test.
# Variables: CLANG, SRC_DIR, GEN_DIR, OUT_DIR, SECONDS.
file(MAKE_DIRECTORY ${OUT_DIR}/corpus)
file(GLOB seeds ${SRC_DIR}/tests/common/link/fuzz/corpus/*)
file(COPY ${seeds} DESTINATION ${OUT_DIR}/corpus)

execute_process(COMMAND pkg-config --cflags --libs libprotobuf-c libzstd libcrypto
                OUTPUT_VARIABLE pc OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config failed for the fuzz build")
endif()
separate_arguments(pc UNIX_COMMAND "${pc}")

execute_process(
  COMMAND ${CLANG} -g -O1 -std=c11 -D_GNU_SOURCE
          -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
          -I${SRC_DIR}/common/base/include -I${SRC_DIR}/common/link/include
          -I${GEN_DIR} -I${GEN_DIR}/proto
          ${SRC_DIR}/tests/common/link/fuzz/fuzz_wire.c ${SRC_DIR}/common/link/src/wire.c
          ${SRC_DIR}/common/link/src/record.c ${SRC_DIR}/common/base/src/err.c
          ${SRC_DIR}/common/base/src/buf.c
          ${GEN_DIR}/proto/drasync.pb-c.c ${pc}
          -o ${OUT_DIR}/fuzz_wire
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the fuzz target with ${CLANG} failed")
endif()

execute_process(
  COMMAND ${OUT_DIR}/fuzz_wire -max_total_time=${SECONDS} -rss_limit_mb=1024
          -max_len=65536 -timeout=10 -print_final_stats=1 -artifact_prefix=${OUT_DIR}/
          ${OUT_DIR}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz_wire found a failure (artifact in ${OUT_DIR})")
endif()
