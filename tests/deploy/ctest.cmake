# The packaging's tests (deploy/: image, Kubernetes manifests, RBAC, systemd
# units), included from tests/CMakeLists.txt after tests/kube/ctest.cmake.
#
#   helm_build             FIXTURES_SETUP helm_bin   builds or reuses helm
#   deploy_image_packages  unit: the Containerfile's runtime packages are
#                          those owning what ldd reports for the agents
#   deploy_systemd_units   unit: systemd-analyze verify/security of the units
#                          (skipped only without systemd-analyze)
#   deploy_manifests       kube_v1: kustomize/helm renderings, dry-run=server
#   deploy_rbac            kube_v1: the shipped RBAC with real tokens, the
#                          agents running on them
#   deploy_image           kube_v1, kube_v1beta1, helm_bin: the image built,
#                          both agents run from it as the chart renders them
#   deploy_image_vulns     scripts/image_vulns.sh over this machine's apt
#                          indexes (a stale package listed with its CVE ids)
#   kubelet_build          FIXTURES_SETUP kubelet_bin  builds or reuses the kubelet
#   deploy_kubelet         kube_v1, kube_v1beta1, helm_bin, kubelet_bin: helm
#                          install on real nodes (containerd + kubelet), pods

set(DS_HELM_BUILD ${CMAKE_CURRENT_LIST_DIR}/../kube/helm/build.sh)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/../kube/helm/go.mod ${CMAKE_CURRENT_LIST_DIR}/../kube/helm/go.sum
  ${DS_HELM_BUILD})
execute_process(COMMAND ${DS_HELM_BUILD} --path
  OUTPUT_VARIABLE DS_HELM_BIN_PATH OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _ds_helm_rc)
if(NOT _ds_helm_rc EQUAL 0 OR DS_HELM_BIN_PATH STREQUAL "")
  message(FATAL_ERROR "tests/kube/helm/build.sh --path failed (${_ds_helm_rc})")
endif()

add_test(NAME helm_build COMMAND ${DS_HELM_BUILD})
set_tests_properties(helm_build PROPERTIES FIXTURES_SETUP helm_bin LABELS kube TIMEOUT 3600
  ENVIRONMENT "DS_HELM_BIN=$ENV{DS_HELM_BIN}")

set(_ds_deploy_dir ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME deploy_image_packages COMMAND ${_ds_deploy_dir}/image_packages.sh)
set_tests_properties(deploy_image_packages PROPERTIES LABELS "unit;deploy"
  ENVIRONMENT "${DS_TEST_ENV}")

add_test(NAME deploy_systemd_units COMMAND ${_ds_deploy_dir}/systemd_units.sh)
set_tests_properties(deploy_systemd_units PROPERTIES LABELS "unit;deploy" SKIP_RETURN_CODE 77
  ENVIRONMENT "${DS_TEST_ENV}")

# Both create the namespaces drasync, ml-team-dr and ml-team-dr-drill on the
# v1 cluster: never at the same time.
add_test(NAME deploy_manifests COMMAND ${_ds_deploy_dir}/manifests.sh)
set_tests_properties(deploy_manifests PROPERTIES LABELS "integration;deploy" TIMEOUT 600
  FIXTURES_REQUIRED "kube_v1;helm_bin" RESOURCE_LOCK ds_deploy_namespaces
  ENVIRONMENT "${DS_TEST_ENV};${DS_KUBE_ENV};DS_HELM_BIN=${DS_HELM_BIN_PATH}")

if(EXISTS ${_ds_deploy_dir}/rbac.sh)
  add_test(NAME deploy_rbac COMMAND ${_ds_deploy_dir}/rbac.sh)
  set_tests_properties(deploy_rbac PROPERTIES LABELS "integration;deploy" TIMEOUT 600
    FIXTURES_REQUIRED "kube_v1" RESOURCE_LOCK ds_deploy_namespaces
    ENVIRONMENT "${DS_TEST_ENV};${DS_KUBE_ENV}")
endif()

# deploy_image (label image): scripts/image.sh builds the image (the
# mmdebstrap base cached under ~/.cache/drasync/image); the chart's helm
# template for a source and a target release gives the RBAC applied to each
# cluster and the pods podman runs (chart_pod.py), in-cluster on the chart's
# ServiceAccount tokens, replicating between the v1beta1 (source) and v1
# (target) clusters. It creates drasync and ml-team-dr on the v1 cluster, as
# deploy_manifests and deploy_rbac do. Skipped (77) without podman.
add_test(NAME deploy_image COMMAND ${_ds_deploy_dir}/image_run.sh)
set_tests_properties(deploy_image PROPERTIES LABELS "integration;deploy;image" TIMEOUT 900
  SKIP_RETURN_CODE 77 FIXTURES_REQUIRED "kube_v1;kube_v1beta1;helm_bin"
  RESOURCE_LOCK ds_deploy_namespaces
  ENVIRONMENT "${DS_TEST_ENV};${DS_KUBE_ENV};DS_HELM_BIN=${DS_HELM_BIN_PATH}")

# deploy_image_vulns (label image): the pending-updates listing over this
# machine's apt indexes, one .deb downloaded from the mirror for its
# changelog. Skipped (77) without a -security index or the mirror.
add_test(NAME deploy_image_vulns COMMAND ${_ds_deploy_dir}/image_vulns.sh)
set_tests_properties(deploy_image_vulns PROPERTIES LABELS "deploy;image" TIMEOUT 300
  SKIP_RETURN_CODE 77 ENVIRONMENT "${DS_TEST_ENV}")

# deploy_kubelet (label image): both agents as Pods on real nodes, one per
# cluster (tests/deploy/node.sh: Debian's containerd and the kubelet that
# kubelet_build builds from tests/kube/kubelet, the control plane's pinned
# modules), the image's OCI archive imported with ctr, the chart installed
# with `helm install --wait` (hostNetwork, a hostPath PersistentVolume per
# release). Creates drasync and ml-team-dr on the v1 cluster, as the tests
# above do. Skipped (77) without podman, buildah or containerd.
set(DS_KUBELET_BUILD ${CMAKE_CURRENT_LIST_DIR}/../kube/kubelet/build.sh)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/../kube/kubelet/go.mod ${CMAKE_CURRENT_LIST_DIR}/../kube/kubelet/go.sum
  ${CMAKE_CURRENT_LIST_DIR}/../kube/kubelet/main.go ${DS_KUBELET_BUILD})
execute_process(COMMAND ${DS_KUBELET_BUILD} --path
  OUTPUT_VARIABLE DS_KUBELET_BIN_PATH OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _ds_kubelet_rc)
if(NOT _ds_kubelet_rc EQUAL 0 OR DS_KUBELET_BIN_PATH STREQUAL "")
  message(FATAL_ERROR "tests/kube/kubelet/build.sh --path failed (${_ds_kubelet_rc})")
endif()
add_test(NAME kubelet_build COMMAND ${DS_KUBELET_BUILD})
set_tests_properties(kubelet_build PROPERTIES FIXTURES_SETUP kubelet_bin LABELS kube TIMEOUT 3600
  ENVIRONMENT "DS_KUBELET_BIN=$ENV{DS_KUBELET_BIN}")
add_test(NAME deploy_kubelet COMMAND ${_ds_deploy_dir}/kubelet_run.sh)
set_tests_properties(deploy_kubelet PROPERTIES LABELS "integration;deploy;image" TIMEOUT 900
  SKIP_RETURN_CODE 77 FIXTURES_REQUIRED "kube_v1;kube_v1beta1;helm_bin;kubelet_bin"
  RESOURCE_LOCK ds_deploy_namespaces
  ENVIRONMENT "${DS_TEST_ENV};${DS_KUBE_ENV};DS_HELM_BIN=${DS_HELM_BIN_PATH};DS_KUBELET_BIN=${DS_KUBELET_BIN_PATH}")
