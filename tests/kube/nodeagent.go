package main

// The node agent stands in for the kubelets and the DRA driver of a test
// cluster: it registers Ready Nodes (with leases and status heartbeats), a
// DeviceClass and one ResourceSlice per node describing its devices, and
// then plays kubelet for pods the real scheduler binds to those nodes: once
// every claim of a pod is allocated and reserved for it, the pod is marked
// Running and Ready; pods being deleted are finalised as a kubelet would.
// No container runs anywhere.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

const (
	agentLabel     = "drasync.dev/fake-node"
	leaseDuration  = 40
	leaseRenew     = 10 * time.Second
	statusInterval = 60 * time.Second
)

type nodeAgent struct {
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	resourceGV schema.GroupVersion
	driver     string
	nodes      []string
	nodeIndex  map[string]int
	devices    int
	queue      workqueue.TypedRateLimitingInterface[string]
	podLister  func(ns, name string) (*corev1.Pod, error)

	mu     sync.Mutex
	nextIP map[string]int
}

func runNodeAgent(args []string) int {
	fs := flag.NewFlagSet("nodeagent", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig")
	nodes := fs.Int("nodes", 2, "number of nodes")
	devices := fs.Int("devices", 4, "devices per node")
	driver := fs.String("driver", "gpu.example.com", "DRA driver name (also the DeviceClass name)")
	prefix := fs.String("node-prefix", "node-", "node name prefix")
	readyFile := fs.String("ready-file", "", "file written once nodes and devices are registered")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kubeconfig == "" || *nodes < 1 || *nodes > 200 || *devices < 0 || *devices > 128 || *driver == "" {
		fmt.Fprintln(os.Stderr, "nodeagent: need --kubeconfig, 1..200 --nodes, 0..128 --devices, --driver")
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: %v\n", err)
		return 1
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "drasync-nodeagent"
	a := &nodeAgent{driver: *driver, devices: *devices, nodeIndex: map[string]int{}, nextIP: map[string]int{}}
	if a.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: %v\n", err)
		return 1
	}
	if a.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: %v\n", err)
		return 1
	}
	for i := 1; i <= *nodes; i++ {
		n := fmt.Sprintf("%s%d", *prefix, i)
		a.nodes = append(a.nodes, n)
		a.nodeIndex[n] = i
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	if err := a.pickResourceAPI(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: %v\n", err)
		return 1
	}
	for _, n := range a.nodes {
		if err := a.registerNode(ctx, n); err != nil {
			fmt.Fprintf(os.Stderr, "nodeagent: node %s: %v\n", n, err)
			return 1
		}
	}
	if err := a.registerDevices(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: devices: %v\n", err)
		return 1
	}

	factory := informers.NewSharedInformerFactory(a.cs, 0)
	pods := factory.Core().V1().Pods()
	// Pods wait here for their claims: look again after 200ms, backing off to 10s.
	a.queue = workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 10*time.Second))
	defer a.queue.ShutDown()
	lister := pods.Lister()
	a.podLister = func(ns, name string) (*corev1.Pod, error) { return lister.Pods(ns).Get(name) }
	enqueue := func(obj interface{}) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if _, mine := a.nodeIndex[p.Spec.NodeName]; mine {
			a.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, n interface{}) { enqueue(n) },
	}); err != nil {
		fmt.Fprintf(os.Stderr, "nodeagent: %v\n", err)
		return 1
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		fmt.Fprintln(os.Stderr, "nodeagent: pod cache never synced")
		return 1
	}
	for i := 0; i < 4; i++ {
		go a.worker(ctx)
	}
	go a.heartbeat(ctx)

	if *readyFile != "" {
		if err := os.WriteFile(*readyFile, []byte("ready\n"), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "nodeagent: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "nodeagent: %d nodes x %d devices of %s registered (%s); serving pods\n",
		len(a.nodes), a.devices, a.driver, a.resourceGV)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "nodeagent: stopping")
	return 0
}

// pickResourceAPI uses resource.k8s.io/v1 where served, else v1beta1 (a
// cluster that serves the API as Kubernetes 1.32/1.33 did).
func (a *nodeAgent) pickResourceAPI(ctx context.Context) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(context.Context) (bool, error) {
		for _, v := range []string{"v1", "v1beta1"} {
			if _, err := a.cs.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/" + v); err == nil {
				a.resourceGV = schema.GroupVersion{Group: "resource.k8s.io", Version: v}
				return true, nil
			} else {
				lastErr = err
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("resource.k8s.io v1 or v1beta1 not served: %v", lastErr)
	}
	return nil
}

func (a *nodeAgent) nodeObject(name string) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("64"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("500Gi"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				agentLabel:               "true",
			},
		},
		Status: a.nodeStatus(res),
	}
}

func (a *nodeAgent) nodeStatus(res corev1.ResourceList) corev1.NodeStatus {
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg,
			LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.NodeStatus{
		Capacity:    res,
		Allocatable: res,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "fake node"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "fake node"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "fake node"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "drasync fake node agent is posting ready status"),
		},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:          "v1.37.2-drasync-fake",
			OperatingSystem:         "linux",
			Architecture:            "amd64",
			ContainerRuntimeVersion: "fake://1.0.0",
			OSImage:                 "drasync fake node",
		},
	}
}

func (a *nodeAgent) registerNode(ctx context.Context, name string) error {
	want := a.nodeObject(name)
	node, err := a.cs.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = a.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	if err := a.postStatus(ctx, name); err != nil {
		return err
	}
	return a.renewLease(ctx, node)
}

// postStatus sets the node's conditions to healthy with a fresh heartbeat and
// removes the taints a node lifecycle controller adds to unready nodes.
func (a *nodeAgent) postStatus(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := a.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		fresh := a.nodeStatus(node.Status.Capacity)
		for i := range fresh.Conditions {
			for _, old := range node.Status.Conditions {
				if old.Type == fresh.Conditions[i].Type && old.Status == fresh.Conditions[i].Status {
					fresh.Conditions[i].LastTransitionTime = old.LastTransitionTime
				}
			}
		}
		node.Status.Conditions = fresh.Conditions
		node.Status.NodeInfo = fresh.NodeInfo
		if len(node.Status.Allocatable) == 0 {
			node.Status.Capacity = fresh.Capacity
			node.Status.Allocatable = fresh.Allocatable
		}
		_, err = a.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func (a *nodeAgent) renewLease(ctx context.Context, node *corev1.Node) error {
	leases := a.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: node.Name,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(node.Name),
				LeaseDurationSeconds: ptr.To(int32(leaseDuration)),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

func (a *nodeAgent) heartbeat(ctx context.Context) {
	lastStatus := time.Now()
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		postStatus := time.Since(lastStatus) >= statusInterval
		for _, name := range a.nodes {
			node, err := a.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				err = a.registerNode(ctx, name)
			} else if err == nil {
				err = a.renewLease(ctx, node)
				if err == nil && postStatus {
					err = a.postStatus(ctx, name)
				}
			}
			if err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "nodeagent: heartbeat %s: %v\n", name, err)
			}
		}
		if postStatus {
			lastStatus = time.Now()
		}
	}
}

func (a *nodeAgent) gvr(resource string) schema.GroupVersionResource {
	return a.resourceGV.WithResource(resource)
}

// registerDevices creates (or updates) the DeviceClass named after the
// driver and one ResourceSlice per node describing its devices, shaped like
// the dra-example-driver's GPUs.
func (a *nodeAgent) registerDevices(ctx context.Context) error {
	apiVersion := a.resourceGV.String()
	class := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": apiVersion,
		"kind":       "DeviceClass",
		"metadata":   map[string]interface{}{"name": a.driver},
		"spec": map[string]interface{}{
			"selectors": []interface{}{
				map[string]interface{}{"cel": map[string]interface{}{
					"expression": fmt.Sprintf("device.driver == %q", a.driver),
				}},
			},
		},
	}}
	if err := a.apply(ctx, a.gvr("deviceclasses"), class); err != nil {
		return fmt.Errorf("DeviceClass %s: %w", a.driver, err)
	}
	for _, node := range a.nodes {
		devs := make([]interface{}, 0, a.devices)
		for d := 0; d < a.devices; d++ {
			attrs := map[string]interface{}{
				"index":         map[string]interface{}{"int": int64(d)},
				"uuid":          map[string]interface{}{"string": fmt.Sprintf("gpu-%08x-%04x", a.nodeIndex[node], d)},
				"model":         map[string]interface{}{"string": "LATEST-GPU-MODEL"},
				"driverVersion": map[string]interface{}{"version": "1.0.0"},
			}
			capacity := map[string]interface{}{"memory": map[string]interface{}{"value": "80Gi"}}
			dev := map[string]interface{}{"name": fmt.Sprintf("gpu-%d", d)}
			if a.resourceGV.Version == "v1beta1" {
				dev["basic"] = map[string]interface{}{"attributes": attrs, "capacity": capacity}
			} else {
				dev["attributes"] = attrs
				dev["capacity"] = capacity
			}
			devs = append(devs, dev)
		}
		slice := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": apiVersion,
			"kind":       "ResourceSlice",
			"metadata":   map[string]interface{}{"name": node + "-" + strings.ReplaceAll(a.driver, ".", "-")},
			"spec": map[string]interface{}{
				"driver":   a.driver,
				"nodeName": node,
				"pool": map[string]interface{}{
					"name": node, "generation": int64(1), "resourceSliceCount": int64(1),
				},
				"devices": devs,
			},
		}}
		if err := a.apply(ctx, a.gvr("resourceslices"), slice); err != nil {
			return fmt.Errorf("ResourceSlice for %s: %w", node, err)
		}
	}
	return nil
}

// apply creates obj or replaces the spec of the existing object.
func (a *nodeAgent) apply(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	ri := a.dyn.Resource(gvr)
	_, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["spec"] = obj.Object["spec"]
		_, err = ri.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (a *nodeAgent) worker(ctx context.Context) {
	for {
		key, quit := a.queue.Get()
		if quit {
			return
		}
		requeue, err := a.syncPod(ctx, key)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "nodeagent: pod %s: %v\n", key, err)
			}
			a.queue.AddRateLimited(key)
		case requeue:
			a.queue.AddRateLimited(key)
		default:
			a.queue.Forget(key)
		}
		a.queue.Done(key)
	}
}

// syncPod does for one pod what a kubelet would: finalise its deletion, or
// start it once its claims are ready. It reports whether to look again later.
func (a *nodeAgent) syncPod(ctx context.Context, key string) (bool, error) {
	ns, name, _ := strings.Cut(key, "/")
	pod, err := a.podLister(ns, name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if pod.DeletionTimestamp != nil {
		err := a.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false, nil
	}
	if podRunningReady(pod) {
		return a.maybeExit(ctx, pod)
	}
	ready, err := a.claimsReady(ctx, pod)
	if err != nil || !ready {
		return !ready, err
	}
	return false, a.markRunning(ctx, pod)
}

// exitCodeAnnotation on a pod (or a Job's pod template) makes its
// containers exit with that code once the pod has run for
// runSecondsAnnotation seconds (default 0), so Jobs can complete.
const (
	exitCodeAnnotation   = "drasync.dev/fake-exit-code"
	runSecondsAnnotation = "drasync.dev/fake-run-seconds"
)

func (a *nodeAgent) maybeExit(ctx context.Context, pod *corev1.Pod) (bool, error) {
	codeText, ok := pod.Annotations[exitCodeAnnotation]
	if !ok {
		return false, nil
	}
	code, err := strconv.ParseInt(codeText, 10, 32)
	if err != nil || code < 0 || code > 255 {
		fmt.Fprintf(os.Stderr, "nodeagent: pod %s/%s: %s=%q is not an exit code 0..255; ignored\n",
			pod.Namespace, pod.Name, exitCodeAnnotation, codeText)
		return false, nil
	}
	run := int64(0)
	if t, ok := pod.Annotations[runSecondsAnnotation]; ok {
		if run, err = strconv.ParseInt(t, 10, 32); err != nil || run < 0 {
			fmt.Fprintf(os.Stderr, "nodeagent: pod %s/%s: %s=%q is not a number of seconds; using 0\n",
				pod.Namespace, pod.Name, runSecondsAnnotation, t)
			run = 0
		}
	}
	if pod.Status.StartTime != nil {
		if left := time.Duration(run)*time.Second - time.Since(pod.Status.StartTime.Time); left > 0 {
			a.queue.AddAfter(pod.Namespace+"/"+pod.Name, left)
			return false, nil
		}
	}
	return false, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := a.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID || cur.Status.Phase != corev1.PodRunning {
			return nil
		}
		now := metav1.Now()
		cur.Status.Phase = corev1.PodSucceeded
		reason := "Completed"
		if code != 0 {
			cur.Status.Phase = corev1.PodFailed
			reason = "Error"
		}
		for i := range cur.Status.ContainerStatuses {
			c := &cur.Status.ContainerStatuses[i]
			started := now
			if c.State.Running != nil {
				started = c.State.Running.StartedAt
			}
			c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: int32(code), Reason: reason, StartedAt: started, FinishedAt: now,
				ContainerID: c.ContainerID,
			}}
			c.Ready, c.Started = false, ptr.To(false)
		}
		for i := range cur.Status.Conditions {
			switch cur.Status.Conditions[i].Type {
			case corev1.PodReady, corev1.ContainersReady, corev1.PodReadyToStartContainers:
				cur.Status.Conditions[i].Status = corev1.ConditionFalse
				cur.Status.Conditions[i].Reason = "PodCompleted"
				cur.Status.Conditions[i].LastTransitionTime = now
			}
		}
		_, err = a.cs.CoreV1().Pods(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func podRunningReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// claimsReady reports whether every ResourceClaim of the pod is allocated
// and reserved for it, as a kubelet requires before preparing resources. A
// claim a PodGroup shares with its pods (DRAWorkloadResourceClaims) is
// reserved for the group: it is the pod's when the reservation names the
// pod's spec.schedulingGroup.podGroupName, as the 1.37 kubelet checks it
// (k8s.io/dynamic-resource-allocation resourceclaim.IsReservedForPod).
func (a *nodeAgent) claimsReady(ctx context.Context, pod *corev1.Pod) (bool, error) {
	for _, pc := range pod.Spec.ResourceClaims {
		var claimName string
		if pc.ResourceClaimName != nil {
			claimName = *pc.ResourceClaimName
		} else {
			for _, st := range pod.Status.ResourceClaimStatuses {
				if st.Name == pc.Name && st.ResourceClaimName != nil {
					claimName = *st.ResourceClaimName
				}
			}
			if claimName == "" {
				return false, nil
			}
		}
		claim, err := a.dyn.Resource(a.gvr("resourceclaims")).Namespace(pod.Namespace).Get(ctx, claimName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if _, found, _ := unstructured.NestedMap(claim.Object, "status", "allocation"); !found {
			return false, nil
		}
		reserved, _, _ := unstructured.NestedSlice(claim.Object, "status", "reservedFor")
		mine := false
		for _, r := range reserved {
			m, ok := r.(map[string]interface{})
			if !ok {
				continue
			}
			if m["uid"] == string(pod.UID) {
				mine = true
			}
			if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil &&
				m["apiGroup"] == "scheduling.k8s.io" && m["resource"] == "podgroups" &&
				m["name"] == *g.PodGroupName {
				mine = true
			}
		}
		if !mine {
			return false, nil
		}
	}
	return true, nil
}

func (a *nodeAgent) podIP(node string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextIP[node]++
	n := a.nextIP[node]
	// Documentation-only status data: no traffic is ever sent to it.
	return fmt.Sprintf("10.244.%d.%d", a.nodeIndex[node]%256, 2+n%250)
}

func (a *nodeAgent) markRunning(ctx context.Context, cached *corev1.Pod) error {
	ip := a.podIP(cached.Spec.NodeName)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := a.cs.CoreV1().Pods(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.UID != cached.UID || pod.DeletionTimestamp != nil || podRunningReady(pod) {
			return nil
		}
		now := metav1.Now()
		st := &pod.Status
		st.Phase = corev1.PodRunning
		st.HostIP = "127.0.0.1"
		st.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
		if st.PodIP == "" {
			st.PodIP = ip
			st.PodIPs = []corev1.PodIP{{IP: ip}}
		}
		if st.StartTime == nil {
			st.StartTime = &now
		}
		for _, t := range []corev1.PodConditionType{
			corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady,
		} {
			setPodCondition(st, t, now)
		}
		st.InitContainerStatuses = nil
		for _, c := range pod.Spec.InitContainers {
			cs := corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: "fake://" + c.Image,
				ContainerID: fmt.Sprintf("fake://%s/%s", pod.UID, c.Name),
			}
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				cs.Ready, cs.Started = true, ptr.To(true)
				cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
			} else {
				cs.State.Terminated = &corev1.ContainerStateTerminated{
					ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now,
					ContainerID: cs.ContainerID,
				}
			}
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		}
		st.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: "fake://" + c.Image,
				ContainerID: fmt.Sprintf("fake://%s/%s", pod.UID, c.Name),
				Ready:       true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		_, err = a.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func setPodCondition(st *corev1.PodStatus, t corev1.PodConditionType, now metav1.Time) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			if st.Conditions[i].Status != corev1.ConditionTrue {
				st.Conditions[i].Status = corev1.ConditionTrue
				st.Conditions[i].LastTransitionTime = now
				st.Conditions[i].Reason = ""
				st.Conditions[i].Message = ""
			}
			return
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
}
