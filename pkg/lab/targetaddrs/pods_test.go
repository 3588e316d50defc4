package targetaddrs_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
)

func targetPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// TestPodsBoard: a target publishes on its own pod and withdraws from it;
// the reader sees the pods of its selector that carry addresses, and not a
// pod being deleted or not Ready.
func TestPodsBoard(t *testing.T) {
	ctx := context.Background()
	app := map[string]string{"app": "targets"}
	client := fake.NewClientset(targetPod("t1", app), targetPod("t2", app), targetPod("other", map[string]string{"app": "lb"}))
	board := targetaddrs.Pods{Client: client, Namespace: "ns", Selector: "app=targets"}

	empty, err := board.Read(ctx)
	require.NoError(t, err)
	require.Empty(t, empty, "no pod published yet")

	t1 := []netip.Addr{netip.MustParseAddr("172.16.0.3"), netip.MustParseAddr("fd00::3")}
	require.NoError(t, board.Publish(ctx, "t1", t1))
	require.NoError(t, board.Publish(ctx, "t2", []netip.Addr{netip.MustParseAddr("172.16.0.4")}))
	require.NoError(t, board.Publish(ctx, "other", []netip.Addr{netip.MustParseAddr("172.16.0.9")}))
	pod, err := client.CoreV1().Pods("ns").Get(ctx, "t1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "172.16.0.3,fd00::3", pod.Annotations[targetaddrs.AddressesAnnotation])

	got, err := board.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string][]netip.Addr{"t1": t1, "t2": {netip.MustParseAddr("172.16.0.4")}}, got,
		"the pods of the selector only")

	pod, err = client.CoreV1().Pods("ns").Get(ctx, "t2", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Status.Conditions[0].Status = corev1.ConditionFalse
	_, err = client.CoreV1().Pods("ns").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	got, err = board.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string][]netip.Addr{"t1": t1}, got, "t2 is not Ready (its node lost)")

	require.NoError(t, board.Withdraw(ctx, "t2"))
	require.NoError(t, board.Withdraw(ctx, "t2"), "withdrawn twice")
	require.NoError(t, board.Withdraw(ctx, "gone"), "a pod that is gone has nothing to withdraw")
	require.Error(t, board.Publish(ctx, "gone", t1), "no pod to publish on")
	pod, err = client.CoreV1().Pods("ns").Get(ctx, "t1", metav1.GetOptions{})
	require.NoError(t, err)
	now := metav1.NewTime(time.Now())
	pod.DeletionTimestamp = &now
	_, err = client.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)

	got, err = board.Read(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "t2 withdrew, t1 is being deleted")
}
