package kubesource

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// apiStub answers the calls of NewClient's client as an API server
// would: lists, watches that stay open, and slice writes it records.
type apiStub struct {
	mu     sync.Mutex
	calls  []string
	slices map[string]*discoveryv1.EndpointSlice
}

func (a *apiStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.calls = append(a.calls, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("watch") == "true" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /api/v1/services":
		l := corev1.ServiceList{TypeMeta: metav1.TypeMeta{Kind: "ServiceList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "1"},
			Items: []corev1.Service{*service("shop", "web", "10.96.0.10")}}
		_ = json.NewEncoder(w).Encode(l)
	case "GET /apis/discovery.k8s.io/v1/endpointslices":
		l := discoveryv1.EndpointSliceList{TypeMeta: metav1.TypeMeta{Kind: "EndpointSliceList", APIVersion: "discovery.k8s.io/v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
		a.mu.Lock()
		for _, s := range a.slices {
			l.Items = append(l.Items, *s)
		}
		a.mu.Unlock()
		_ = json.NewEncoder(w).Encode(l)
	case "POST /apis/discovery.k8s.io/v1/namespaces/shop/endpointslices":
		s := &discoveryv1.EndpointSlice{}
		_ = json.NewDecoder(r.Body).Decode(s)
		s.ResourceVersion = "2"
		a.mu.Lock()
		a.slices[s.Name] = s
		a.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(s)
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})
	}
}

// NewClient's client lists and watches with the label selectors and
// writes slices at the paths of the API.
func TestRESTClient(t *testing.T) {
	stub := &apiStub{slices: map[string]*discoveryv1.EndpointSlice{}}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	defer srv.CloseClientConnections()
	c, err := NewClient(&rest.Config{Host: srv.URL})
	require.NoError(t, err)

	pub, err := NewPublisher(c, proxyName, node, WithLogger(testLogger(t)))
	require.NoError(t, err)
	web := service("shop", "web", "10.96.0.10")
	require.NoError(t, pub.Publish(context.Background(), []*corev1.Service{web}, []Target{target("a", "web", true, "172.16.0.5")}))

	rec := &recorder{}
	src, err := New(c, proxyName, node, rec, WithLogger(testLogger(t)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Run(ctx) }()
	require.Eventually(t, func() bool {
		return equalAddrs(rec.endpoints()[spn("shop", "web", "http")], addrs("172.16.0.5:8080"))
	}, waitFor, 10*time.Millisecond)
	cancel()
	<-done

	stub.mu.Lock()
	defer stub.mu.Unlock()
	assert.Contains(t, stub.calls, "GET /api/v1/services?labelSelector=service.kubernetes.io%2Fservice-proxy-name%3Dcauseway-conduit-a&limit=500&resourceVersion=0")
	assert.Contains(t, stub.calls, "GET /apis/discovery.k8s.io/v1/endpointslices?labelSelector="+
		url.QueryEscape(NodeLabel+"="+node+","+ManagedByLabel+"="+ManagedBy+","+ProxyNameLabel+"="+proxyName)+"&limit=500&resourceVersion=0",
		"this node's slices only")
	assert.Contains(t, stub.calls, "POST /apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?")
}
