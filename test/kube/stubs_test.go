package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The lab's LB and target stubs as pods (the lab binary's `lab lb` and
// `lab target`, image localhost/causeway/lab loaded by make test-kube), with
// SPIFFE credentials from the node's SPIRE agent.
const (
	conduitService = "load-balancer." + chartRelease + "." + chartNamespace
	proxyService   = "proxy." + conduitService
	echoPort       = 5000
	lbAccount      = "lb-stub"
	targetAccount  = "target-stub"
	lbDeployment   = "lb"
	targetsName    = "targets"
	targetLink     = "nsm-0"
	nsmDir         = "/var/lib/networkservicemesh"
	// stubCPU is each stub's CPU request.
	stubCPU = "50m"
)

// chartVIPs are the example values' VIPs.
var chartVIPs = []netip.Addr{netip.MustParseAddr("20.0.0.1"), netip.MustParseAddr("2001:db8::1")}

// spareVIPs are VIPs that the stubs carry from their start but the chart
// declares only while the VIPs scenario runs (changeVIPs): the LBs route
// them to the targets and the targets answer on them, as an LB and targets
// that learn their VIPs from the trench's nsp would once it serves them.
// What the scenario checks is the proxies' part.
var spareVIPs = []netip.Addr{netip.MustParseAddr("20.0.0.2"), netip.MustParseAddr("2001:db8::2")}

// stubVIPs are every VIP the stubs carry.
func stubVIPs() []netip.Addr { return slices.Concat(chartVIPs, spareVIPs) }

// targetReplicas is how many target stubs the scenarios find, and leave.
const targetReplicas = 3

// stubArgs are the arguments of the stub command (lb or target) every pod
// of it shares; the pod's name comes from the downward API.
func stubArgs(command string, extra ...string) []string {
	return stubArgsFor(command, stubVIPs(), extra...)
}

// stubArgsFor is stubArgs with the VIPs vips (a stub of another trench).
func stubArgsFor(command string, vips []netip.Addr, extra ...string) []string {
	args := []string{command, "-spiffe", "-nsmgr", "unix://" + nsmDir + "/nsm.io.sock", "-name", "$(POD_NAME)"}
	for _, v := range vips {
		args = append(args, "-vip", v.String())
	}
	return append(args, extra...)
}

// lbArgs are the arguments of an LB stub of the conduit service whose
// targets are the pods of the Deployment targets: the LBs learn the
// targets' addresses through the API server, from the annotations that the
// targets put on their own pods (targetaddrs.Pods), wherever they run.
func lbArgs(vips []netip.Addr, service, targets string) []string {
	return stubArgsFor("lb", vips, "-service", service, "-socket", "/run/stub/nse.sock", "-targets-from-pods", "app="+targets)
}

// stubDeployment is a Deployment of replicas pods of the lab image running
// args: privileged (they set sysctls and routes in their namespaces), with
// the node's NSM and SPIRE sockets.
func stubDeployment(name, account, image string, replicas int32, args []string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	privileged := true
	grace := int64(10)
	hostDir := func(vol, path string) corev1.Volume {
		t := corev1.HostPathDirectoryOrCreate
		return corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// NSM's ClusterSPIFFEID gives each its pod's SPIFFE ID.
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, spiffeLabel: "true"}},
				Spec: corev1.PodSpec{
					ServiceAccountName:            account,
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name: "stub", Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
						Env: []corev1.EnvVar{
							{Name: "SPIFFE_ENDPOINT_SOCKET", Value: "unix://" + spireSockets + "/agent.sock"},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							// The target names its pod on its connection with NSM's clientinfo,
							// which also reads this one (and warns at each request without it).
							{Name: "CLUSTER_NAME", Value: "causeway-test"},
						},
						SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
						// A request, as an application's pod has: a pod without one
						// is BestEffort, whose CPU share (2 of 1,024) lets any burst
						// of the node's other pods starve the stub for seconds.
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse(stubCPU), corev1.ResourceMemory: resource.MustParse("32Mi"),
						}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "spire", MountPath: spireSockets, ReadOnly: true},
							{Name: "nsm", MountPath: nsmDir, ReadOnly: true},
							{Name: "run", MountPath: "/run/stub"},
						},
					}},
					Volumes: []corev1.Volume{
						hostDir("spire", spireSockets), hostDir("nsm", nsmDir),
						{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

// startStubs starts two LB stubs (NSEs of the conduit's network service)
// and targetReplicas targets (clients of the proxy's), in the chart's
// namespace; they go when t ends.
func (c *cluster) startStubs(ctx context.Context, t *testing.T) {
	t.Helper()
	tag := os.Getenv("CAUSEWAY_IMAGE_TAG")
	image := "localhost/causeway/lab:" + tag
	c.stubAccounts(ctx, t, chartNamespace)
	deployments := c.client.AppsV1().Deployments(chartNamespace)
	for _, d := range []*appsv1.Deployment{
		stubDeployment(lbDeployment, lbAccount, image, 2, lbArgs(stubVIPs(), conduitService, targetsName)),
		stubDeployment(targetsName, targetAccount, image, targetReplicas, stubArgs("target", "-service", proxyService,
			"-port", fmt.Sprint(echoPort), "-service-port", fmt.Sprint(servicePort), "-publish-on-pod")),
	} {
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("deployment %s: %v", d.Name, err)
		}
	}
	t.Cleanup(func() { c.stopStubs(t) })
}

// stopStubs deletes the stubs' deployments and waits until their pods are
// gone (idempotent).
func (c *cluster) stopStubs(t *testing.T) {
	t.Helper()
	deployments := c.client.AppsV1().Deployments(chartNamespace)
	for _, name := range []string{targetsName, lbDeployment} {
		err := deployments.Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", name, err)
		}
	}
	c.waitPodsGone(t, chartNamespace, "app in ("+targetsName+","+lbDeployment+")")
}

// stubAccounts makes the stubs' service accounts in ns, each with the least
// it needs of the API server: a target annotates its own pod, an LB reads
// the pods (targetaddrs.Pods).
func (c *cluster) stubAccounts(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	for account, verbs := range map[string][]string{lbAccount: {"list"}, targetAccount: {"patch"}} {
		c.serviceAccount(ctx, t, ns, account)
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: account},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs}},
		}
		if _, err := c.client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("role %s/%s: %v", ns, account, err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: account},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: account},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: ns}},
		}
		if _, err := c.client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("role binding %s/%s: %v", ns, account, err)
		}
	}
}

// stubPods returns the running pods of the stub deployment name once there
// are want of them, each logging ready (the stub's log line that says it is
// up), sorted by name.
func (c *cluster) stubPods(ctx context.Context, t *testing.T, name string, want int, ready string) []*corev1.Pod {
	t.Helper()
	return c.stubPodsIn(ctx, t, chartNamespace, name, want, ready)
}

// stubPodsIn is stubPods of the namespace ns.
func (c *cluster) stubPodsIn(ctx context.Context, t *testing.T, ns, name string, want int, ready string) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	eventually(ctx, t, fmt.Sprintf("%d %s pods logging %q", want, name, ready), func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for i := range list.Items {
			p := &list.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("%s %s", p.Name, p.Status.Phase)
			}
			if out := c.logs(ctx, p); !strings.Contains(out, ready) {
				return fmt.Errorf("%s has not logged %q: %s", p.Name, ready, lastLines(out, 3))
			}
			pods = append(pods, p)
		}
		if len(pods) != want {
			return fmt.Errorf("%d pods", len(pods))
		}
		return nil
	})
	return pods
}

// waitPodsGone waits until no pod of namespace ns matches selector.
func (c *cluster) waitPodsGone(t *testing.T, ns, selector string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eventually(ctx, t, "pods "+selector+" gone", func(ctx context.Context) error {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		if len(list.Items) != 0 {
			return fmt.Errorf("%d left", len(list.Items))
		}
		return nil
	})
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
