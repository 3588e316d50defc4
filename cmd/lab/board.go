package main

import (
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"

	"github.com/causeway-net/causeway/internal/kubeclient"
	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
)

// podsBoard is the targets' board on the API server (targetaddrs.Pods) of
// a stub run as a pod: the pods of selector in the pod's namespace
// (POD_NAMESPACE), with the pod's service account.
func podsBoard(selector string) (targetaddrs.Board, error) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		return nil, fmt.Errorf("the targets' board on the API server: POD_NAMESPACE is not set")
	}
	rc, err := kubeclient.Config("")
	if err != nil {
		return nil, fmt.Errorf("the targets' board on the API server: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("the targets' board on the API server: %w", err)
	}
	return targetaddrs.Pods{Client: cs, Namespace: ns, Selector: selector}, nil
}
