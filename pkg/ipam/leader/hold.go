package leader

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Held is the replicas' Lease taken by a command (ipam export, ipam
// delete-records) so that no replica serves, nor starts to, while it reads
// or removes the records. The command does not renew it: it holds it for
// the duration given to Take, after which a replica may take it back.
type Held struct {
	lock     *resourcelock.LeaseLock
	leases   coordinationv1.LeasesGetter
	ns, name string
}

// Take makes identity the holder of the Lease name in ns for hold. It takes
// a Lease that does not exist, that no one holds (a replica that stopped
// cleanly released it), or that has not changed for its whole duration
// since Take first saw it (a killed replica's; the time is measured here, as
// client-go's elector does, so clocks need not agree). While a replica
// renews it, Take polls every poll until ctx ends, and then fails saying who
// holds it. Every write names the version read: a replica that renews in
// between makes Take look again.
func Take(ctx context.Context, leases coordinationv1.LeasesGetter, ns, name, identity string, hold, poll time.Duration) (*Held, error) {
	h := &Held{leases: leases, ns: ns, name: name, lock: &resourcelock.LeaseLock{
		LeaseMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Client: leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}}
	var seen []byte
	var seenAt time.Time
	for {
		rec, raw, err := h.lock.Get(ctx)
		now := time.Now()
		mine := resourcelock.LeaderElectionRecord{
			HolderIdentity: identity, LeaseDurationSeconds: int(hold.Seconds()),
			AcquireTime: metav1.NewTime(now), RenewTime: metav1.NewTime(now),
		}
		switch {
		case apierrors.IsNotFound(err):
			err = h.lock.Create(ctx, mine)
		case err != nil:
			return nil, fmt.Errorf("read the Lease %s/%s: %w", ns, name, err)
		default:
			if string(raw) != string(seen) {
				seen, seenAt = raw, now
			}
			expired := now.Sub(seenAt) > time.Duration(rec.LeaseDurationSeconds)*time.Second
			if rec.HolderIdentity != "" && rec.HolderIdentity != identity && !expired {
				err = fmt.Errorf("held by %q, renewed %s", rec.HolderIdentity, rec.RenewTime.UTC().Format(time.RFC3339))
				break
			}
			mine.LeaderTransitions = rec.LeaderTransitions + 1
			err = h.lock.Update(ctx, mine)
		}
		if err == nil {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the Lease %s/%s (a replica that serves holds it: stop the replicas first): %w", ns, name, err)
		case <-time.After(poll):
		}
	}
}

// Release gives the Lease up as a replica that stops does: no holder, so
// that a replica takes it at once.
func (h *Held) Release(ctx context.Context) error {
	now := metav1.NewTime(time.Now())
	err := h.lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now})
	if err != nil {
		return fmt.Errorf("release the Lease %s/%s: %w", h.ns, h.name, err)
	}
	return nil
}

// Delete removes the Lease, at the version this holder wrote (it fails if
// a replica took it since).
func (h *Held) Delete(ctx context.Context) error {
	l, err := h.leases.Leases(h.ns).Get(ctx, h.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("delete the Lease %s/%s: %w", h.ns, h.name, err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != h.lock.Identity() {
		return fmt.Errorf("delete the Lease %s/%s: it is no longer ours (held by %v)", h.ns, h.name, l.Spec.HolderIdentity)
	}
	rv := l.ResourceVersion
	err = h.leases.Leases(h.ns).Delete(ctx, h.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if err != nil {
		return fmt.Errorf("delete the Lease %s/%s: %w", h.ns, h.name, err)
	}
	return nil
}
