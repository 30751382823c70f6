// The kubelet the image test runs on one node of a test cluster: the
// upstream kubelet command, built from the same pinned Go modules as the
// control plane (../go.mod), as a binary of its own so adding it does not
// change the control plane's cache key.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
