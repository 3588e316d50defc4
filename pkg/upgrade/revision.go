package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The labels the DaemonSet controller puts on its pods and revisions.
const (
	hashLabel       = appsv1.DefaultDaemonSetUniqueLabelKey // controller-revision-hash
	generationLabel = "pod-template-generation"
)

// revisions are a DaemonSet's ControllerRevisions: the templates its pods
// were made from, by hash, and the hash of the newest.
type revisions struct {
	byHash  map[string]*corev1.PodTemplateSpec
	current string
}

// readRevisions lists the ControllerRevisions that ds owns.
func readRevisions(ctx context.Context, cs kubernetes.Interface, ds *appsv1.DaemonSet) (*revisions, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("daemonset %s: selector: %w", ds.Name, err)
	}
	list, err := cs.AppsV1().ControllerRevisions(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("daemonset %s: list its revisions: %w", ds.Name, err)
	}
	r := &revisions{byHash: map[string]*corev1.PodTemplateSpec{}}
	var newest int64 = -1
	for i := range list.Items {
		cr := &list.Items[i]
		if !metav1.IsControlledBy(cr, ds) {
			continue
		}
		tmpl, err := revisionTemplate(cr)
		if err != nil {
			return nil, fmt.Errorf("daemonset %s: revision %s: %w", ds.Name, cr.Name, err)
		}
		hash := revisionHash(cr, ds.Name)
		r.byHash[hash] = tmpl
		if cr.Revision > newest {
			newest, r.current = cr.Revision, hash
		}
	}
	if r.current == "" {
		return nil, fmt.Errorf("daemonset %s has no revision yet", ds.Name)
	}
	return r, nil
}

// revisionHash is the hash a revision's pods carry: its label, else the
// suffix of its name (<daemonset>-<hash>).
func revisionHash(cr *appsv1.ControllerRevision, dsName string) string {
	if h := cr.Labels[hashLabel]; h != "" {
		return h
	}
	return strings.TrimPrefix(cr.Name, dsName+"-")
}

// revisionTemplate decodes the pod template a DaemonSet revision stores
// (a patch of the DaemonSet: {"spec":{"template":{...}}}).
func revisionTemplate(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	raw := cr.Data.Raw
	if len(raw) == 0 && cr.Data.Object != nil {
		var err error
		if raw, err = json.Marshal(cr.Data.Object); err != nil {
			return nil, err
		}
	}
	var data struct {
		Spec struct {
			Template *corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("decode its template: %w", err)
	}
	if data.Spec.Template == nil {
		return nil, fmt.Errorf("no template in its data")
	}
	return data.Spec.Template, nil
}
