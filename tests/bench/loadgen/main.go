// loadgen: a fast object generator for the drasync benchmarks.
//
//	loadgen -kubeconfig K -namespaces a,b -count N [-workers W] -mode configmaps|mixed
//	        [-size BYTES] [-prefix P] [-replicas R] [-qps Q] [-burst B]
//	loadgen -kubeconfig K -patch NAMESPACE/NAME    (one change to one ConfigMap)
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
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
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

	g := &gen{cs: cs, mode: *mode, size: *size, prefix: *prefix, replicas: int32(*replicas)}
	for _, n := range strings.Split(*nsList, ",") {
		if n = strings.TrimSpace(n); n != "" {
			g.ns = append(g.ns, n)
		}
	}
	if len(g.ns) == 0 || *count < 0 || *workers < 1 {
		fail("need at least one namespace, count >= 0 and workers >= 1")
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
				err := retry(func() error { return g.create(ctx, i) })
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
	if g.mode == "mixed" {
		t := time.Now()
		if err := g.settle(ctx, *settleTimeout); err != nil {
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
func (g *gen) settle(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=drasync-loadgen"}
	for {
		pending := 0
		for _, ns := range g.ns {
			l, err := g.cs.AppsV1().Deployments(ns).List(ctx, sel)
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

func (g *gen) create(ctx context.Context, i int) error {
	kind := "ConfigMap"
	if g.mode == "mixed" {
		kind = mixedKinds[i%len(mixedKinds)]
	}
	m := g.meta(i, kind)
	ns := m.Namespace
	opt := metav1.CreateOptions{FieldManager: "drasync-loadgen"}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": m.Name}}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": m.Name}},
		Spec:       podSpec(i),
	}
	var err error
	switch kind {
	case "ConfigMap":
		_, err = g.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: m,
			Data: map[string]string{"payload": g.filler}}, opt)
	case "Secret":
		_, err = g.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: m,
			Type: corev1.SecretTypeOpaque, StringData: map[string]string{"token": g.filler}}, opt)
	case "ServiceAccount":
		_, err = g.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: m}, opt)
	case "Service":
		_, err = g.cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: m,
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: sel.MatchLabels,
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}}, opt)
	case "Deployment":
		r := g.replicas
		_, err = g.cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: m,
			Spec: appsv1.DeploymentSpec{Replicas: &r, Selector: sel, Template: tmpl}}, opt)
	case "StatefulSet":
		r := g.replicas
		_, err = g.cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: m,
			Spec: appsv1.StatefulSetSpec{Replicas: &r, Selector: sel, Template: tmpl,
				ServiceName: m.Name}}, opt)
	case "ResourceClaimTemplate":
		_, err = g.cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx,
			&resourcev1.ResourceClaimTemplate{ObjectMeta: m,
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: claimSpec()}}, opt)
	case "ResourceClaim":
		_, err = g.cs.ResourceV1().ResourceClaims(ns).Create(ctx,
			&resourcev1.ResourceClaim{ObjectMeta: m, Spec: claimSpec()}, opt)
	case "Pod":
		_, err = g.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: m,
			Spec: podSpec(i)}, opt)
	}
	return err
}
