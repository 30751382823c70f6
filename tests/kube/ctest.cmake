# Real Kubernetes control planes as ctest fixtures (included from
# tests/CMakeLists.txt).
#
#   kube_build          FIXTURES_SETUP kube_bin   builds or reuses the binary
#   kube_v1_up          FIXTURES_SETUP kube_v1    resource.k8s.io/v1 cluster,
#                                                 2 nodes x 8 gpu.example.com devices
#   kube_v1beta1_up     FIXTURES_SETUP kube_v1beta1  serves resource.k8s.io/v1beta1, not v1
#   kube_workload_up    FIXTURES_SETUP kube_workload  v1 with --features workload-claims
#                                                 (PodGroup/Workload v1beta1 and their
#                                                 claims), 1 node x 4 devices
#   kube_v1beta2_up     FIXTURES_SETUP kube_v1beta2  serves resource.k8s.io/v1beta2 as its
#                                                 preferred version, not v1 (as 1.33 did),
#                                                 1 node x 4 devices
#   kube_*_down         FIXTURES_CLEANUP          stop them and remove their state
#   kube_smoke          the smoke test of deliverable 5
#
# DS_KUBE_ENV (for tests that require the fixtures):
#   DS_KUBECONFIG_V1, DS_KUBECONFIG_V1BETA1, DS_KUBECONFIG_WORKLOAD, DS_KUBECONFIG_V1BETA2,
#   DS_KUBE_BIN,
#   DS_CLUSTER_SH
# Cluster names derive from a hash of the build directory, so test runs
# of two build trees never share or stop each other's clusters.

set(DS_CLUSTER_SH ${CMAKE_CURRENT_LIST_DIR}/cluster.sh)

if(DEFINED ENV{DS_KUBE_STATE} AND NOT "$ENV{DS_KUBE_STATE}" STREQUAL "")
  set(_ds_kube_state "$ENV{DS_KUBE_STATE}")
else()
  set(_ds_kube_state "/tmp/drasync-kube")
endif()
set(DS_KUBE_STATE "${_ds_kube_state}" CACHE PATH "Where the test clusters keep their state")

# The binary's path is known without building it (build.sh --path); the
# kube_build fixture builds it when the cache has none.
file(GLOB _ds_kube_inputs ${CMAKE_CURRENT_LIST_DIR}/go.mod ${CMAKE_CURRENT_LIST_DIR}/go.sum
  ${CMAKE_CURRENT_LIST_DIR}/*.go
  ${CMAKE_CURRENT_LIST_DIR}/compat/go.mod ${CMAKE_CURRENT_LIST_DIR}/compat/go.sum ${CMAKE_CURRENT_LIST_DIR}/compat/*.go)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_ds_kube_inputs})
execute_process(COMMAND ${CMAKE_CURRENT_LIST_DIR}/build.sh --path
  OUTPUT_VARIABLE DS_KUBE_BIN_PATH OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _ds_kube_rc)
if(NOT _ds_kube_rc EQUAL 0 OR DS_KUBE_BIN_PATH STREQUAL "")
  message(FATAL_ERROR "tests/kube/build.sh --path failed (${_ds_kube_rc})")
endif()

string(SHA256 _ds_kube_hash "${CMAKE_BINARY_DIR}")
string(SUBSTRING "${_ds_kube_hash}" 0 10 _ds_kube_hash)
set(DS_KUBE_CLUSTER_V1 "ds-${_ds_kube_hash}-v1")
set(DS_KUBE_CLUSTER_V1BETA1 "ds-${_ds_kube_hash}-v1beta1")
set(DS_KUBE_CLUSTER_WORKLOAD "ds-${_ds_kube_hash}-workload")
set(DS_KUBE_CLUSTER_V1BETA2 "ds-${_ds_kube_hash}-v1beta2")

set(_ds_kube_test_env "DS_KUBE_STATE=${DS_KUBE_STATE}" "DS_KUBE_BIN=${DS_KUBE_BIN_PATH}")

add_test(NAME kube_build COMMAND ${CMAKE_CURRENT_LIST_DIR}/build.sh)
set_tests_properties(kube_build PROPERTIES FIXTURES_SETUP kube_bin LABELS kube TIMEOUT 5400
  ENVIRONMENT "DS_KUBE_BIN=$ENV{DS_KUBE_BIN}")

# One retry: a port picked free can be taken before the component binds it.
add_test(NAME kube_v1_up COMMAND bash -c
  "\"$0\" down \"$1\" && { \"$0\" up \"$1\" --dra-api v1 || { \"$0\" down \"$1\" && \"$0\" up \"$1\" --dra-api v1; }; } && \"$0\" nodes \"$1\" --nodes 2 --devices 8 --driver gpu.example.com"
  ${DS_CLUSTER_SH} ${DS_KUBE_CLUSTER_V1})
set_tests_properties(kube_v1_up PROPERTIES FIXTURES_SETUP kube_v1 FIXTURES_REQUIRED kube_bin
  LABELS kube TIMEOUT 600 ENVIRONMENT "${_ds_kube_test_env}")

add_test(NAME kube_v1beta1_up COMMAND bash -c
  "\"$0\" down \"$1\" && { \"$0\" up \"$1\" --dra-api v1beta1 || { \"$0\" down \"$1\" && \"$0\" up \"$1\" --dra-api v1beta1; }; } && \"$0\" nodes \"$1\" --nodes 2 --devices 8 --driver gpu.example.com"
  ${DS_CLUSTER_SH} ${DS_KUBE_CLUSTER_V1BETA1})
set_tests_properties(kube_v1beta1_up PROPERTIES FIXTURES_SETUP kube_v1beta1 FIXTURES_REQUIRED kube_bin
  LABELS kube TIMEOUT 600 ENVIRONMENT "${_ds_kube_test_env}")

# Only the tests of workload-level DRA need it (FIXTURES_REQUIRED kube_workload).
add_test(NAME kube_workload_up COMMAND bash -c
  "\"$0\" down \"$1\" && { \"$0\" up \"$1\" --features workload-claims || { \"$0\" down \"$1\" && \"$0\" up \"$1\" --features workload-claims; }; } && \"$0\" nodes \"$1\" --nodes 1 --devices 4 --driver gpu.example.com"
  ${DS_CLUSTER_SH} ${DS_KUBE_CLUSTER_WORKLOAD})
set_tests_properties(kube_workload_up PROPERTIES FIXTURES_SETUP kube_workload FIXTURES_REQUIRED kube_bin
  LABELS kube TIMEOUT 600 ENVIRONMENT "${_ds_kube_test_env}")

# Only the tests of a resource.k8s.io/v1beta2 pair need it (FIXTURES_REQUIRED kube_v1beta2).
add_test(NAME kube_v1beta2_up COMMAND bash -c
  "\"$0\" down \"$1\" && { \"$0\" up \"$1\" --dra-api v1beta2 || { \"$0\" down \"$1\" && \"$0\" up \"$1\" --dra-api v1beta2; }; } && \"$0\" nodes \"$1\" --nodes 1 --devices 4 --driver gpu.example.com"
  ${DS_CLUSTER_SH} ${DS_KUBE_CLUSTER_V1BETA2})
set_tests_properties(kube_v1beta2_up PROPERTIES FIXTURES_SETUP kube_v1beta2 FIXTURES_REQUIRED kube_bin
  LABELS kube TIMEOUT 600 ENVIRONMENT "${_ds_kube_test_env}")

add_test(NAME kube_v1beta2_down COMMAND ${DS_CLUSTER_SH} down ${DS_KUBE_CLUSTER_V1BETA2})
set_tests_properties(kube_v1beta2_down PROPERTIES FIXTURES_CLEANUP kube_v1beta2
  LABELS kube TIMEOUT 120 ENVIRONMENT "${_ds_kube_test_env}")

add_test(NAME kube_workload_down COMMAND ${DS_CLUSTER_SH} down ${DS_KUBE_CLUSTER_WORKLOAD})
set_tests_properties(kube_workload_down PROPERTIES FIXTURES_CLEANUP kube_workload
  LABELS kube TIMEOUT 120 ENVIRONMENT "${_ds_kube_test_env}")

add_test(NAME kube_v1_down COMMAND ${DS_CLUSTER_SH} down ${DS_KUBE_CLUSTER_V1})
set_tests_properties(kube_v1_down PROPERTIES FIXTURES_CLEANUP kube_v1
  LABELS kube TIMEOUT 120 ENVIRONMENT "${_ds_kube_test_env}")

add_test(NAME kube_v1beta1_down COMMAND ${DS_CLUSTER_SH} down ${DS_KUBE_CLUSTER_V1BETA1})
set_tests_properties(kube_v1beta1_down PROPERTIES FIXTURES_CLEANUP kube_v1beta1
  LABELS kube TIMEOUT 120 ENVIRONMENT "${_ds_kube_test_env}")

set(DS_KUBE_ENV
  "DS_KUBECONFIG_V1=${DS_KUBE_STATE}/${DS_KUBE_CLUSTER_V1}/admin.kubeconfig"
  "DS_KUBECONFIG_V1BETA1=${DS_KUBE_STATE}/${DS_KUBE_CLUSTER_V1BETA1}/admin.kubeconfig"
  "DS_KUBECONFIG_WORKLOAD=${DS_KUBE_STATE}/${DS_KUBE_CLUSTER_WORKLOAD}/admin.kubeconfig"
  "DS_KUBECONFIG_V1BETA2=${DS_KUBE_STATE}/${DS_KUBE_CLUSTER_V1BETA2}/admin.kubeconfig"
  "DS_KUBE_BIN=${DS_KUBE_BIN_PATH}"
  "DS_CLUSTER_SH=${DS_CLUSTER_SH}")

add_test(NAME kube_smoke COMMAND ${CMAKE_CURRENT_LIST_DIR}/smoke.sh)
set_tests_properties(kube_smoke PROPERTIES FIXTURES_REQUIRED "kube_v1;kube_v1beta1"
  LABELS "kube;integration" TIMEOUT 600
  ENVIRONMENT "DS_FIXTURES=${DS_FIXTURES_DIR};${DS_KUBE_ENV};DS_KUBE_STATE=${DS_KUBE_STATE}")
