package targetaddrs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// AddressesAnnotation is the annotation of a target stub's pod that holds
// its published addresses, comma-separated.
const AddressesAnnotation = "lab.causeway.net/addresses"

// Pods is the Board of target stubs run as pods: a target publishes on its
// own pod (named as the target) as AddressesAnnotation, and a reader lists
// the pods of Selector. A pod being deleted or not Ready reads as
// withdrawn: the LBs let its flows go as soon as its deletion begins, and
// as soon as the cluster marks it not Ready when its node stops answering;
// a target that could not withdraw (killed) leaves with its pod.
type Pods struct {
	Client    kubernetes.Interface
	Namespace string
	// Selector is the label selector of the targets' pods (Read only).
	Selector string
}

func (p Pods) Publish(ctx context.Context, name string, addrs []netip.Addr) error {
	list := make([]string, 0, len(addrs))
	for _, a := range addrs {
		list = append(list, a.String())
	}
	return p.annotate(ctx, name, strings.Join(list, ","))
}

func (p Pods) Withdraw(ctx context.Context, name string) error {
	err := p.annotate(ctx, name, nil)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// annotate sets AddressesAnnotation of the pod name to value (removes it
// when value is nil).
func (p Pods) annotate(ctx context.Context, name string, value any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{AddressesAnnotation: value},
	}})
	if err != nil {
		return err
	}
	_, err = p.Client.CoreV1().Pods(p.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotate pod %s/%s: %w", p.Namespace, name, err)
	}
	return nil
}

func (p Pods) Read(ctx context.Context) (map[string][]netip.Addr, error) {
	// From the API server's watch cache (resource version 0), not a quorum
	// read of etcd: the LBs read every 200 ms.
	pods, err := p.Client.CoreV1().Pods(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: p.Selector, ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("list target pods (%s/%s): %w", p.Namespace, p.Selector, err)
	}
	out := map[string][]netip.Addr{}
	for _, pod := range pods.Items {
		value, ok := pod.Annotations[AddressesAnnotation]
		if !ok || pod.DeletionTimestamp != nil || !podReady(&pod) {
			continue
		}
		var addrs []netip.Addr
		for _, s := range strings.Split(value, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
				addrs = append(addrs, a)
			}
		}
		out[pod.Name] = addrs
	}
	return out, nil
}

// podReady reports whether the pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
