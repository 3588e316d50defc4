package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock answers every write with err.
type fakeLock struct {
	resourcelock.Interface
	err error
}

func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return f.err }
func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return f.err }

// Only a successful write of the Lease naming this replica counts as a
// renewal; a release (no holder) or a failed write does not, and a renewal
// is fresh for the deadline only.
func TestRenewalsCountOwnSuccessfulWrites(t *testing.T) {
	f := &fakeLock{}
	l := &renewals{Interface: f, identity: "me"}
	ctx := context.Background()
	assert.False(t, l.fresh(time.Hour), "never renewed")

	f.err = errors.New("connection refused")
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	assert.False(t, l.fresh(time.Hour), "a failed renewal")

	f.err = nil
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""})
	assert.False(t, l.fresh(time.Hour), "a release")

	_ = l.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	assert.True(t, l.fresh(time.Hour))
	time.Sleep(20 * time.Millisecond)
	assert.False(t, l.fresh(10*time.Millisecond), "older than the deadline")
}
