package main

import (
	"fmt"
	"runtime/debug"

	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// Each component's main is its cobra command run by component-base's cli
// helper, as the upstream cmd/<component>/<component>.go mains do.

func runAPIServer(args []string) int {
	cmd := apiserverapp.NewAPIServerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runScheduler(args []string) int {
	cmd := schedulerapp.NewSchedulerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runControllerManager(args []string) int {
	cmd := cmapp.NewControllerManagerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runKubectl(args []string) int {
	cmd := kubectlcmd.NewDefaultKubectlCommand()
	cmd.SetArgs(args)
	if err := cli.RunNoErrOutput(cmd); err != nil {
		return 1
	}
	return 0
}

func runVersion(args []string) int {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Println("no build info")
		return 1
	}
	fmt.Printf("go %s\n", bi.GoVersion)
	for _, d := range bi.Deps {
		switch d.Path {
		case "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3":
			fmt.Printf("%s %s\n", d.Path, d.Version)
		}
	}
	return 0
}
