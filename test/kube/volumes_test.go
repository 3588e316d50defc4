package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// recycleVolumes makes the cluster's Released local volumes Available again,
// as a static provisioner would: their directories emptied on the node,
// their claim references removed. Nothing else reuses a static volume
// (docs/kubernetes.md), so tests that delete claims call it when they end.
func (c *cluster) recycleVolumes(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pvs, err := c.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("volumes: %v", err)
		return
	}
	for _, pv := range pvs.Items {
		if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.Local == nil {
			continue
		}
		entries, err := os.ReadDir(pv.Spec.Local.Path)
		if err != nil {
			t.Errorf("volume %s: %v", pv.Name, err)
			continue
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(pv.Spec.Local.Path, e.Name())); err != nil {
				t.Errorf("volume %s: %v", pv.Name, err)
			}
		}
		// A merge patch: removing a reference already gone is no error.
		patch := []byte(`{"spec": {"claimRef": null}}`)
		if _, err := c.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("volume %s: %v", pv.Name, err)
		}
	}
}

// waitClaimGone waits until the claim name of namespace ns no longer
// exists (its volume is Released then).
func (c *cluster) waitClaimGone(t *testing.T, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eventually(ctx, t, "claim "+name+" gone", func(ctx context.Context) error {
		_, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("claim %s still there (%v)", name, err)
	})
}
