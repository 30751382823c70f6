// loadgen: a fast object generator for the drasync benchmarks.
//
//	loadgen -kubeconfig K -namespaces a,b -count N [-workers W] -mode configmaps|mixed
//	        [-size BYTES] [-prefix P] [-replicas R] [-qps Q] [-burst B]
//	loadgen -kubeconfig K -patch NAMESPACE/NAME    (one change to one ConfigMap)
//	loadgen -kubeconfig K -mode mixed -namespaces a,b -count N -dump FILE
//	loadgen -kubeconfig K -apply FILE -namespace-prefix P [-workers W]
//	loadgen -kubeconfig SRC -rpo N -target-kubeconfig DST -namespaces a,b
//	        -target-namespaces x,y [-interval D] [-rpo-timeout D]
//
// It creates the namespaces when missing, then N objects spread round-robin
// over them by W concurrent workers through one client-go clientset (protobuf
// on the wire, high QPS and burst). "configmaps" makes ConfigMaps with SIZE
// bytes of data; "mixed" cycles through Deployments, StatefulSets, Services
// (headless: the test clusters' service range is a /24), Secrets, ConfigMaps,
// ServiceAccounts, ResourceClaimTemplates and ResourceClaims
// (resource.k8s.io/v1, deviceClassName gpu.example.com) and bare Pods.
// An object that already exists counts as made (a rerun is idempotent). In
// mixed mode it then waits until the Deployment controller has annotated
// every Deployment (revision), so the objects do not change under a reader.
// 429, 5xx and timeouts are retried with backoff.
//
// The last line on stdout is "loadgen created=N existing=N seconds=S per_s=R".
//
// -dump (scripts/bench.sh target) makes nothing: it creates the namespaces,
// then sends each object as a dry-run create (dryRun=All) and writes what the
// API server returned (defaults filled in, a uid, no resourceVersion), one
// JSON object a line, the namespaces first, in the order of -count: the
// objects an exporter would have read from a source.
//
// -apply FILE (scripts/bench.sh target: the API server's ceiling) reads one
// JSON object a line and server-side applies each (PATCH, apply-patch+yaml,
// field manager drasync, force), the request the importer makes, with W
// workers, into namespace P-<its namespace> (created first, untimed;
// Namespace lines are skipped). It does not wait for the Deployment
// controller, whose work goes on after it exits. The last line:
// "loadgen applied=N seconds=S per_s=R workers=W".
//
// -rpo N (scripts/bench.sh e2e: the replication delay in watch mode) watches
// the ConfigMaps of every namespace of the target cluster (-target-kubeconfig)
// and makes N changes on the source, one every -interval: change i merge-
// patches key drasync-bench-rpo of ConfigMap number i (modulo how many there
// are) made by loadgen in -namespaces, the value naming the change. A change
// is visible when the target's watch delivers that ConfigMap, in the
// namespace of the same position in -target-namespaces, with that value; its
// delay runs from just before the patch was sent. It waits up to
// -rpo-timeout after the last change, then prints one line
// "loadgen rpo changes=N seen=N p50_s=X p90_s=X p99_s=X max_s=X" (a change
// never seen counts as the timeout in the percentiles).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const deviceClass = "gpu.example.com"

var mixedKinds = []string{
	"Deployment", "StatefulSet", "Service", "Secret", "ConfigMap",
	"ServiceAccount", "ResourceClaimTemplate", "ResourceClaim", "Pod",
}

type gen struct {
	cs       *kubernetes.Clientset
	mode     string
	size     int
	prefix   string
	replicas int32
	ns       []string
	filler   string
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	nsList := flag.String("namespaces", "bench", "comma-separated namespaces (created when missing)")
	count := flag.Int("count", 1000, "objects to create")
	workers := flag.Int("workers", 32, "concurrent workers")
	mode := flag.String("mode", "configmaps", "configmaps | mixed")
	size := flag.Int("size", 512, "bytes of data per ConfigMap/Secret")
	prefix := flag.String("prefix", "bench", "object name prefix")
	replicas := flag.Int("replicas", 0, "replicas of the Deployments and StatefulSets")
	qps := flag.Float64("qps", 5000, "client QPS")
	burst := flag.Int("burst", 10000, "client burst")
	settleTimeout := flag.Duration("settle-timeout", 5*time.Minute,
		"mixed: how long to wait for the controllers to settle the objects")
	patch := flag.String("patch", "", "NAMESPACE/NAME: change one ConfigMap's data and exit")
	dump := flag.String("dump", "", "FILE: dry-run create the objects, write what the server returned")
	apply := flag.String("apply", "", "FILE: server-side apply the objects of FILE (one JSON a line)")
	nsPrefix := flag.String("namespace-prefix", "ceiling", "-apply: namespace P-<namespace of the object>")
	rpo := flag.Int("rpo", 0, "N: make N ConfigMap changes on the source, time each until the target shows it")
	targetKubeconfig := flag.String("target-kubeconfig", "", "-rpo: kubeconfig of the target cluster")
	targetNs := flag.String("target-namespaces", "", "-rpo: the target's namespaces, in the order of -namespaces")
	interval := flag.Duration("interval", 50*time.Millisecond, "-rpo: time between two changes")
	rpoTimeout := flag.Duration("rpo-timeout", 30*time.Second, "-rpo: how long to wait after the last change")
	flag.Parse()

	if *mode != "configmaps" && *mode != "mixed" {
		fail("-mode must be configmaps or mixed, not %q", *mode)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	cfg.QPS = float32(*qps)
	cfg.Burst = *burst
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "drasync-loadgen"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("client: %v", err)
	}
	ctx := context.Background()

	if *patch != "" {
		ns, name, ok := strings.Cut(*patch, "/")
		if !ok || ns == "" || name == "" {
			fail("-patch wants NAMESPACE/NAME, not %q", *patch)
		}
		body := fmt.Sprintf(`{"data":{"drasync-bench-change":"%d"}}`, time.Now().UnixNano())
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(body), metav1.PatchOptions{FieldManager: "drasync-loadgen"}); err != nil {
			fail("patch %s: %v", *patch, err)
		}
		fmt.Printf("loadgen patched configmap %s\n", *patch)
		return
	}

	if *rpo > 0 {
		tcfg, err := clientcmd.BuildConfigFromFlags("", *targetKubeconfig)
		if err != nil {
			fail("target kubeconfig: %v", err)
		}
		tcfg.QPS, tcfg.Burst = cfg.QPS, cfg.Burst
		tcfg.ContentType, tcfg.AcceptContentTypes = cfg.ContentType, cfg.AcceptContentTypes
		tcfg.UserAgent = cfg.UserAgent
		tcs, err := kubernetes.NewForConfig(tcfg)
		if err != nil {
			fail("target client: %v", err)
		}
		src, dst := splitList(*nsList), splitList(*targetNs)
		if len(src) == 0 || len(src) != len(dst) {
			fail("-rpo needs as many -target-namespaces as -namespaces")
		}
		measureRPO(ctx, cs, tcs, src, dst, *rpo, *interval, *rpoTimeout)
		return
	}

	if *apply != "" {
		if *workers < 1 {
			fail("need workers >= 1")
		}
		applyFile(ctx, cs, *apply, *nsPrefix, *workers)
		return
	}

	g := &gen{cs: cs, mode: *mode, size: *size, prefix: *prefix, replicas: int32(*replicas)}
	for _, n := range strings.Split(*nsList, ",") {
		if n = strings.TrimSpace(n); n != "" {
			g.ns = append(g.ns, n)
		}
	}
	if len(g.ns) == 0 || *count < 0 || *workers < 1 {
		fail("need at least one namespace, count >= 0 and workers >= 1")
	}
	if *dump != "" && g.mode != "mixed" {
		fail("-dump needs -mode mixed")
	}
	g.filler = filler(*size)
	for _, n := range g.ns {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "drasync-loadgen"}}}
		if err := retry(func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		}); err != nil && !apierrors.IsAlreadyExists(err) {
			fail("namespace %s: %v", n, err)
		}
	}
	if g.mode == "mixed" {
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: deviceClass}}
		if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil &&
			!apierrors.IsAlreadyExists(err) {
			fmt.Fprintf(os.Stderr, "loadgen: DeviceClass %s not created (%v); claims name it anyway\n",
				deviceClass, err)
		}
	}

	var created, existing, next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	var dumped []runtime.Object
	if *dump != "" {
		dumped = make([]runtime.Object, *count)
	}
	start := time.Now()
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= *count || firstErr.Load() != nil {
					return
				}
				err := retry(func() error {
					o, err := g.create(ctx, i, dumped != nil)
					if err == nil && dumped != nil {
						dumped[i] = o
					}
					return err
				})
				switch {
				case err == nil:
					created.Add(1)
				case apierrors.IsAlreadyExists(err):
					existing.Add(1)
				default:
					firstErr.CompareAndSwap(nil, fmt.Errorf("object %d: %w", i, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if e := firstErr.Load(); e != nil {
		fail("%v (after %d created)", e, created.Load())
	}
	if dumped != nil {
		if err := g.writeDump(ctx, *dump, dumped); err != nil {
			fail("dump: %v", err)
		}
		fmt.Printf("loadgen dumped=%d seconds=%.2f file=%s\n", len(dumped), secs, *dump)
		return
	}
	if g.mode == "mixed" {
		t := time.Now()
		if err := g.settle(ctx, *settleTimeout,
			"app.kubernetes.io/managed-by=drasync-loadgen"); err != nil {
			fail("%v", err)
		}
		fmt.Printf("loadgen settled in %.2f s\n", time.Since(t).Seconds())
	}
	fmt.Printf("loadgen created=%d existing=%d seconds=%.2f per_s=%.0f\n",
		created.Load(), existing.Load(), secs, float64(created.Load()+existing.Load())/secs)
}

// settle waits until the controllers have written what they add to the
// objects made (the Deployment controller's revision annotation), so that a
// pass of the exporter right after sees the objects as they stay.
// selector "" takes every Deployment of the namespaces.
func (g *gen) settle(ctx context.Context, timeout time.Duration, selector string) error {
	return settleDeployments(ctx, g.cs, g.ns, timeout, selector)
}

func settleDeployments(ctx context.Context, cs *kubernetes.Clientset, namespaces []string,
	timeout time.Duration, selector string) error {
	deadline := time.Now().Add(timeout)
	sel := metav1.ListOptions{LabelSelector: selector}
	for {
		pending := 0
		for _, ns := range namespaces {
			l, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
			if err != nil {
				return fmt.Errorf("settle: list deployments in %s: %w", ns, err)
			}
			for i := range l.Items {
				d := &l.Items[i]
				if d.Annotations["deployment.kubernetes.io/revision"] == "" ||
					d.Status.ObservedGeneration < d.Generation {
					pending++
				}
			}
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("settle: %d Deployments still not observed by their controller after %v",
				pending, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
	os.Exit(1)
}

// retry runs f until it succeeds or fails with an error a retry cannot fix.
func retry(f func() error) error {
	delay := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || attempt == 20 || !(apierrors.IsTooManyRequests(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)) {
			return err
		}
		if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
			delay = time.Duration(s) * time.Second
		}
		time.Sleep(delay + time.Duration(rand.Int63n(int64(delay))))
		if delay < 2*time.Second {
			delay *= 2
		}
	}
}

func filler(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewSource(1))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.Intn(len(alphabet))]
	}
	return string(b)
}

func (g *gen) meta(i int, kind string) metav1.ObjectMeta {
	// Mixed: each run of len(mixedKinds) objects goes to one namespace, so
	// that every kind lands in every namespace.
	ns := i % len(g.ns)
	if g.mode == "mixed" {
		ns = i / len(mixedKinds) % len(g.ns)
	}
	return metav1.ObjectMeta{
		Name:      fmt.Sprintf("%s-%s-%d", g.prefix, strings.ToLower(kind), i),
		Namespace: g.ns[ns],
		Labels: map[string]string{
			"app.kubernetes.io/managed-by": "drasync-loadgen",
			"app":                          fmt.Sprintf("%s-%d", g.prefix, i%100),
		},
	}
}

func podSpec(i int) corev1.PodSpec {
	c := corev1.Container{
		Name:  "main",
		Image: "registry.example.net/bench/app:1.0",
		Args:  []string{"--id", fmt.Sprint(i)},
		Env:   []corev1.EnvVar{{Name: "SHARD", Value: fmt.Sprint(i % 64)}},
	}
	return corev1.PodSpec{Containers: []corev1.Container{c}}
}

func claimSpec() resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{
			Name:    "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: deviceClass},
		}},
	}}
}

// create makes object i (dryRun: only as a dry run) and returns what the
// server returned, its apiVersion and kind set.
func (g *gen) create(ctx context.Context, i int, dryRun bool) (runtime.Object, error) {
	kind := "ConfigMap"
	if g.mode == "mixed" {
		kind = mixedKinds[i%len(mixedKinds)]
	}
	m := g.meta(i, kind)
	ns := m.Namespace
	opt := metav1.CreateOptions{FieldManager: "drasync-loadgen"}
	if dryRun {
		opt.DryRun = []string{metav1.DryRunAll}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": m.Name}}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": m.Name}},
		Spec:       podSpec(i),
	}
	var out runtime.Object
	var err error
	switch kind {
	case "ConfigMap":
		out, err = g.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: m,
			Data: map[string]string{"payload": g.filler}}, opt)
	case "Secret":
		out, err = g.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: m,
			Type: corev1.SecretTypeOpaque, StringData: map[string]string{"token": g.filler}}, opt)
	case "ServiceAccount":
		out, err = g.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: m}, opt)
	case "Service":
		out, err = g.cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: m,
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel.MatchLabels,
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}}, opt)
	case "Deployment":
		r := g.replicas
		out, err = g.cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: m,
			Spec: appsv1.DeploymentSpec{Replicas: &r, Selector: sel, Template: tmpl}}, opt)
	case "StatefulSet":
		r := g.replicas
		out, err = g.cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: m,
			Spec: appsv1.StatefulSetSpec{Replicas: &r, Selector: sel, Template: tmpl,
				ServiceName: m.Name}}, opt)
	case "ResourceClaimTemplate":
		out, err = g.cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx,
			&resourcev1.ResourceClaimTemplate{ObjectMeta: m,
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: claimSpec()}}, opt)
	case "ResourceClaim":
		out, err = g.cs.ResourceV1().ResourceClaims(ns).Create(ctx,
			&resourcev1.ResourceClaim{ObjectMeta: m, Spec: claimSpec()}, opt)
	case "Pod":
		out, err = g.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: m,
			Spec: podSpec(i)}, opt)
	}
	if err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(gvkOf[kind])
	return out, nil
}

var gvkOf = map[string]schema.GroupVersionKind{
	"Deployment":            {Group: "apps", Version: "v1", Kind: "Deployment"},
	"StatefulSet":           {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	"Service":               {Version: "v1", Kind: "Service"},
	"Secret":                {Version: "v1", Kind: "Secret"},
	"ConfigMap":             {Version: "v1", Kind: "ConfigMap"},
	"ServiceAccount":        {Version: "v1", Kind: "ServiceAccount"},
	"ResourceClaimTemplate": {Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaimTemplate"},
	"ResourceClaim":         {Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaim"},
	"Pod":                   {Version: "v1", Kind: "Pod"},
}

// writeDump writes the namespaces as the server has them, then the objects.
func (g *gen) writeDump(ctx context.Context, path string, objs []runtime.Object) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, n := range g.ns {
		ns, err := g.cs.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			f.Close()
			return fmt.Errorf("namespace %s: %w", n, err)
		}
		ns.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
		if err := enc.Encode(ns); err != nil {
			f.Close()
			return err
		}
	}
	for _, o := range objs {
		if err := enc.Encode(o); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// One object of -apply, ready to send.
type applyObj struct {
	rc       rest.Interface
	resource string
	ns, name string
	body     []byte
}

// resourceOf is the REST client and plural of the kinds -apply sends.
func resourceOf(cs *kubernetes.Clientset, apiVersion, kind string) (rest.Interface, string, bool) {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return cs.CoreV1().RESTClient(), "configmaps", true
	case "v1/Secret":
		return cs.CoreV1().RESTClient(), "secrets", true
	case "v1/ServiceAccount":
		return cs.CoreV1().RESTClient(), "serviceaccounts", true
	case "v1/Service":
		return cs.CoreV1().RESTClient(), "services", true
	case "v1/Pod":
		return cs.CoreV1().RESTClient(), "pods", true
	case "apps/v1/Deployment":
		return cs.AppsV1().RESTClient(), "deployments", true
	case "apps/v1/StatefulSet":
		return cs.AppsV1().RESTClient(), "statefulsets", true
	case "resource.k8s.io/v1/ResourceClaim":
		return cs.ResourceV1().RESTClient(), "resourceclaims", true
	case "resource.k8s.io/v1/ResourceClaimTemplate":
		return cs.ResourceV1().RESTClient(), "resourceclaimtemplates", true
	}
	return nil, "", false
}

// applyFile server-side applies every object of path (Namespaces: created
// first, untimed) into prefix-<namespace> with `workers` workers.
func applyFile(ctx context.Context, cs *kubernetes.Clientset, path, prefix string, workers int) {
	f, err := os.Open(path)
	if err != nil {
		fail("%v", err)
	}
	var objs []applyObj
	var namespaces []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var o map[string]any
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			fail("%s:%d: %v", path, line, err)
		}
		api, _ := o["apiVersion"].(string)
		kind, _ := o["kind"].(string)
		meta, _ := o["metadata"].(map[string]any)
		if meta == nil {
			fail("%s:%d: no metadata", path, line)
		}
		if kind == "Namespace" {
			continue
		}
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		ns = prefix + "-" + ns
		meta["namespace"] = ns
		rc, res, ok := resourceOf(cs, api, kind)
		if !ok {
			fail("%s:%d: -apply does not know %s %s", path, line, api, kind)
		}
		body, err := json.Marshal(o)
		if err != nil {
			fail("%s:%d: %v", path, line, err)
		}
		if !seen[ns] {
			seen[ns] = true
			namespaces = append(namespaces, ns)
		}
		objs = append(objs, applyObj{rc: rc, resource: res, ns: ns, name: name, body: body})
	}
	if err := sc.Err(); err != nil {
		fail("%s: %v", path, err)
	}
	f.Close()
	for _, n := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := retry(func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		}); err != nil && !apierrors.IsAlreadyExists(err) {
			fail("namespace %s: %v", n, err)
		}
	}

	force := true
	opts := &metav1.PatchOptions{FieldManager: "drasync", Force: &force}
	var next, done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(objs) || firstErr.Load() != nil {
					return
				}
				o := &objs[i]
				err := retry(func() error {
					return o.rc.Patch(types.ApplyPatchType).Namespace(o.ns).
						Resource(o.resource).Name(o.name).
						VersionedParams(opts, metav1.ParameterCodec).
						Body(o.body).Do(ctx).Error()
				})
				if err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("%s %s/%s: %w",
						o.resource, o.ns, o.name, err))
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if e := firstErr.Load(); e != nil {
		fail("%v (after %d applied)", e, done.Load())
	}
	fmt.Printf("loadgen applied=%d seconds=%.2f per_s=%.0f workers=%d\n",
		done.Load(), secs, float64(done.Load())/secs, workers)
}

func splitList(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// measureRPO: see -rpo in the header.
func measureRPO(ctx context.Context, src, dst *kubernetes.Clientset, srcNs, dstNs []string,
	n int, interval, timeout time.Duration) {
	const key = "drasync-bench-rpo"
	type target struct{ ns, name string }
	var objs []target // source ConfigMaps made by loadgen, with the target namespace
	var srcOf []string
	for i, ns := range srcNs {
		l, err := src.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/managed-by=drasync-loadgen"})
		if err != nil {
			fail("rpo: list configmaps in %s: %v", ns, err)
		}
		for _, cm := range l.Items {
			objs = append(objs, target{dstNs[i], cm.Name})
			srcOf = append(srcOf, ns)
		}
	}
	if len(objs) == 0 {
		fail("rpo: no ConfigMaps made by loadgen in %v", srcNs)
	}
	watched := map[string]bool{}
	for _, ns := range dstNs {
		watched[ns] = true
	}

	var mu sync.Mutex
	sent := make([]time.Time, n)
	delay := make([]time.Duration, n)
	seen := 0
	allSeen := make(chan struct{})
	// The watch first, from the list's resourceVersion, so no change is missed.
	l, err := dst.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		fail("rpo: list the target's configmaps: %v", err)
	}
	w, err := dst.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{
		ResourceVersion: l.ResourceVersion, AllowWatchBookmarks: false})
	if err != nil {
		fail("rpo: watch the target's configmaps: %v", err)
	}
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || !watched[cm.Namespace] {
				continue
			}
			var i int
			var nanos int64
			if _, err := fmt.Sscanf(cm.Data[key], "%d-%d", &i, &nanos); err != nil || i < 0 || i >= n {
				continue
			}
			now := time.Now()
			mu.Lock()
			if delay[i] == 0 && !sent[i].IsZero() {
				delay[i] = now.Sub(sent[i])
				seen++
				if seen == n {
					close(allSeen)
				}
			}
			mu.Unlock()
		}
	}()

	next := time.Now()
	for i := 0; i < n; i++ {
		o := objs[i%len(objs)]
		body := fmt.Sprintf(`{"data":{%q:"%d-%d"}}`, key, i, time.Now().UnixNano())
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		if err := retry(func() error {
			_, err := src.CoreV1().ConfigMaps(srcOf[i%len(objs)]).Patch(ctx, o.name,
				types.MergePatchType, []byte(body), metav1.PatchOptions{FieldManager: "drasync-loadgen"})
			return err
		}); err != nil {
			fail("rpo: patch %s/%s: %v", srcOf[i%len(objs)], o.name, err)
		}
	}
	select {
	case <-allSeen:
	case <-time.After(timeout):
	}
	w.Stop()
	mu.Lock()
	defer mu.Unlock()
	d := make([]float64, n)
	for i := range d {
		if delay[i] == 0 {
			d[i] = timeout.Seconds()
		} else {
			d[i] = delay[i].Seconds()
		}
	}
	sort.Float64s(d)
	pct := func(p float64) float64 {
		k := int(math.Ceil(p*float64(n))) - 1
		if k < 0 {
			k = 0
		}
		return d[k]
	}
	fmt.Printf("loadgen rpo changes=%d seen=%d objects=%d p50_s=%.3f p90_s=%.3f p99_s=%.3f max_s=%.3f\n",
		n, seen, len(objs), pct(0.5), pct(0.9), pct(0.99), d[n-1])
}
