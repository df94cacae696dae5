// Package dropin holds the peers' own manifests as their charts render them (testdata: each file
// names its chart, version and template), and reads them for the tests that run those pods
// from our image with only the image changed.
//
//	objs, err := dropin.Load("testdata/fluent-bit-chart.yaml")
//	spec, err := dropin.PodSpec(objs, "DaemonSet", "fluent-bit")
package dropin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Load reads every document of a rendered chart into typed objects.
func Load(file string) ([]runtime.Object, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []runtime.Object
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(bytes.TrimSpace(raw.Raw)) == "null" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
		if runtime.IsNotRegisteredError(err) { // a custom resource (a ServiceMonitor)
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw.Raw); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			obj, err = u, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, obj)
	}
}

// PodSpec is the pod template's spec of the workload of that kind and name.
func PodSpec(objs []runtime.Object, kind, name string) (corev1.PodSpec, error) {
	for _, o := range objs {
		switch w := o.(type) {
		case *appsv1.Deployment:
			if kind == "Deployment" && w.Name == name {
				return w.Spec.Template.Spec, nil
			}
		case *appsv1.DaemonSet:
			if kind == "DaemonSet" && w.Name == name {
				return w.Spec.Template.Spec, nil
			}
		case *appsv1.StatefulSet:
			if kind == "StatefulSet" && w.Name == name {
				return w.Spec.Template.Spec, nil
			}
		}
	}
	return corev1.PodSpec{}, fmt.Errorf("no %s %s in the rendered chart", kind, name)
}

// Container is the named container of spec.
func Container(spec corev1.PodSpec, name string) (corev1.Container, error) {
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if c.Name == name {
			return c, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("no container %s in the pod spec", name)
}
