// Package csi follows the Secrets Store CSI driver: which versions of a SecretProviderClass's
// objects the pods mounted, as the driver reports them in one SecretProviderClassPodStatus per
// pod and class. Stakater Reloader (--enable-csi-integration) rolls a workload when those
// versions change; wave reads them as one more kind of config, configref.SecretProviderClass,
// hashed as Reloader hashes them so that Reloader's marks on a workload carry over.
//
//	t := csi.NewTracker()
//	t.OnChange(func(ref configref.Ref) { /* look again at the workloads using ref */ })
//	err := t.Watch(informer) // on PodStatuses, with csi.Transform and csi.Indexers()
//	hash, ok := t.Current(configref.Ref{Kind: configref.SecretProviderClass, Namespace: "web", Name: "vault"})
package csi

import (
	"crypto/sha1" //nolint:gosec // Reloader's formula, not a security boundary: versions, not values
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configwave/configwave/internal/kube/configref"
	"github.com/configwave/configwave/internal/wave/slimcache"

	"github.com/configwave/configwave/internal/wave/waveclient"
)

// The driver's API, and the name a pod's CSI volume gives it.
var (
	PodStatuses = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasspodstatuses"}
	Classes     = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasses"}
)

const (
	Driver = "secrets-store.csi.k8s.io"
	// ClassAttribute is the volume attribute that names the SecretProviderClass.
	ClassAttribute = "secretProviderClass"
)

// Status is what wave keeps of one SecretProviderClassPodStatus: whose it is, and Reloader's
// hash of the versions the pod mounted.
type Status struct {
	slimcache.Identity
	Class string
	Hash  string
	// UnreadableField names a field that is not what the driver writes ("" when all are); the
	// status then has no class, as if its pod reported nothing.
	UnreadableField string
}

// Ref names the SecretProviderClass a status reports on.
func (s *Status) Ref() configref.Ref {
	return configref.Ref{Kind: configref.SecretProviderClass, Namespace: s.Namespace, Name: s.Class}
}

// Object is one mounted object, as the driver lists it in a status.
type Object struct{ ID, Version string }

// Hash is Stakater Reloader's hash of a status (its GetSHAfromSecretProviderClassPodStatus):
// SHA-1 over "ID=VERSION" of each object and "SecretProviderClassName=CLASS", sorted and
// joined with ";". Reloader writes it into its STAKATER_<NAME>_SECRETPROVIDERCLASS env var.
func Hash(class string, objects []Object) string {
	entries := make([]string, 0, len(objects)+1)
	for _, o := range objects {
		entries = append(entries, o.ID+"="+o.Version)
	}
	entries = append(entries, "SecretProviderClassName="+class)
	slices.Sort(entries)
	sum := sha1.Sum([]byte(strings.Join(entries, ";"))) //nolint:gosec
	return hex.EncodeToString(sum[:])
}

// Transform is the informer transform: an unstructured SecretProviderClassPodStatus becomes a
// *Status of about a hundred bytes. It never fails: client-go fails a whole list on one
// object's transform error (the informer would never sync, and wave never become ready) and
// keeps the old object on a watch's. A status whose fields are not what the driver writes
// becomes a *Status of no class, as if its pod reported nothing, that names the field (never
// its value) for the Tracker to log.
func Transform(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a *Status again, or a tombstone
	}
	id := slimcache.Identity{Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}
	unreadable := func(field string) (any, error) { return &Status{Identity: id, UnreadableField: field}, nil }
	class, _, err := unstructured.NestedString(u.Object, "status", "secretProviderClassName")
	if err != nil {
		return unreadable("status.secretProviderClassName")
	}
	list, _, err := unstructured.NestedSlice(u.Object, "status", "objects")
	if err != nil {
		return unreadable("status.objects")
	}
	objects := make([]Object, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return unreadable(fmt.Sprintf("status.objects[%d]", i))
		}
		objectID, _ := m["id"].(string)
		version, _ := m["version"].(string)
		objects = append(objects, Object{ID: objectID, Version: version})
	}
	return &Status{Identity: id, Class: class, Hash: Hash(class, objects)}, nil
}

var _ metav1.Object = &Status{}

// ClassesOf lists the SecretProviderClasses whose driver volume a container of the pod spec
// mounts (as Reloader, which rolls for a class only a container mounts), each once, with the
// volume, for Events.
func ClassesOf(spec *corev1.PodSpec) map[string]string {
	mounted := map[string]bool{}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				mounted[m.Name] = true
			}
		}
	}
	out := map[string]string{}
	for _, v := range spec.Volumes {
		if v.CSI == nil || v.CSI.Driver != Driver || !mounted[v.Name] {
			continue
		}
		if name := v.CSI.VolumeAttributes[ClassAttribute]; name != "" {
			if _, ok := out[name]; !ok {
				out[name] = fmt.Sprintf("volume %q", v.Name)
			}
		}
	}
	return out
}

// Majority is the hash most statuses report; a tie goes to the smallest hash, so that every
// replica of wave picks the same. It decides only when wave has seen no change yet: at start,
// while the pods may be half-way through a rotation.
func Majority(hashes []string) string {
	count := map[string]int{}
	best := ""
	for _, h := range hashes {
		count[h]++
		if best == "" || count[h] > count[best] || count[h] == count[best] && h < best {
			best = h
		}
	}
	return best
}

// Served reports whether the API server serves the driver's PodStatuses: without its CRDs
// there is nothing to follow.
func Served(d waveclient.Discovery) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(PodStatuses.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover whether %s are served: %w", PodStatuses.GroupResource(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == PodStatuses.Resource {
			return true, nil
		}
	}
	return false, nil
}
