// Package kubeclient owns how a Causeway process finds the Kubernetes API
// server: from a kubeconfig file when one is named, or else from the pod's
// service account.
package kubeclient

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config is the API server's client configuration: from the kubeconfig
// file at path, or the pod's service account when path is empty.
func Config(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return rest.InClusterConfig()
}
