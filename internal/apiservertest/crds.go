package apiservertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates the CustomResourceDefinitions of the YAML files (one
// or more documents each) and waits until they are served.
func (s *Server) InstallCRDs(files ...string) {
	s.t.Helper()
	client, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		s.t.Fatalf("client: %v", err)
	}
	ctx := context.Background()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			s.t.Fatalf("CRD file: %v", err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				s.t.Fatalf("%s: %v", f, err)
			}
			if obj == nil {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			if _, err := client.Resource(crdResource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				s.t.Fatalf("create CRD %s from %s: %v", u.GetName(), f, err)
			}
			s.waitServed(client, u)
		}
	}
}

// waitServed waits until the CRD's resources can be listed.
func (s *Server) waitServed(client dynamic.Interface, crd *unstructured.Unstructured) {
	s.t.Helper()
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "name")
		gvr := schema.GroupVersionResource{Group: group, Version: name, Resource: plural}
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := client.Resource(gvr).List(context.Background(), metav1.ListOptions{Limit: 1})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				s.t.Fatal(fmt.Sprintf("%s is not served: %v", gvr, err))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
