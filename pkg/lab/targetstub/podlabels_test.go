package targetstub

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/checks/checkrequest"
)

// TestPodLabels: with PodLabels the target's own chain puts its pod's and
// node's names from the environment on the request, keeping a label the
// request already carries; without, it adds none (the NSMgr's clientinfo
// would then fill them with its own pod's).
func TestPodLabels(t *testing.T) {
	t.Setenv("POD_NAME", "targets-7d9f-x2")
	t.Setenv("NODE_NAME", "node-a")
	t.Setenv("CLUSTER_NAME", "c1")
	for _, tc := range []struct {
		name   string
		cfg    Config
		given  map[string]string
		labels map[string]string
	}{
		{"pod labels", Config{Name: "t", PodLabels: true}, nil,
			map[string]string{"podName": "targets-7d9f-x2", "nodeName": "node-a", "clusterName": "c1"}},
		{"a label given is kept", Config{Name: "t", PodLabels: true}, map[string]string{"nodeName": "lab"},
			map[string]string{"podName": "targets-7d9f-x2", "nodeName": "lab", "clusterName": "c1"}},
		{"off", Config{Name: "t"}, map[string]string{"nodeName": "lab"}, map[string]string{"nodeName": "lab"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got map[string]string
			client := chain.NewNetworkServiceClient(append(tc.cfg.elements(),
				checkrequest.NewClient(t, func(_ *testing.T, r *networkservice.NetworkServiceRequest) {
					got = r.GetConnection().GetLabels()
				}))...)
			_, err := client.Request(context.Background(), &networkservice.NetworkServiceRequest{
				Connection: &networkservice.Connection{Id: "c", Labels: tc.given},
			})
			require.NoError(t, err)
			require.Equal(t, tc.labels, got)
		})
	}
}
