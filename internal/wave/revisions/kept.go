package revisions

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configwave/configwave/internal/kube/configref"
)

// ErrConfigGone: a revision's index or a snapshot is gone, or is not wave's.
var ErrConfigGone = errors.New("its config is no longer kept")

// Getter reads a ConfigMap or Secret whole (ClientAPI is one).
type Getter interface {
	Get(ctx context.Context, ref configref.Ref) (metav1.Object, error)
}

// Kept reads what a revision's pods are given (the revision whose pods carry inputsHash, of
// template): its index and every snapshot the index names, each checked to be wave's. An undo
// to a revision without them would start its pods on the live config and hold them there, so
// wave's undo passes over such a revision and kubectl configwave refuses it. Only NotFound, or
// an object that is not wave's, counts as gone (an error wrapping ErrConfigGone); any other
// error is returned as it is, for the caller to decide again later. A revision whose pods name
// no source keeps no index and needs none. Where the index was read and a snapshot is gone,
// the index's entries come back with the error, to say what the revision was made of.
func Kept(ctx context.Context, api Getter, namespace, inputsHash string, template *corev1.PodTemplateSpec) (Snapshots, error) {
	gone := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, ErrConfigGone)...)
	}
	index := IndexName(inputsHash)
	obj, err := api.Get(ctx, configref.Ref{Kind: configref.ConfigMap, Namespace: namespace, Name: index})
	switch {
	case apierrors.IsNotFound(err) && len(SourcesOf(namespace, &template.Spec)) == 0:
		return Snapshots{}, nil
	case apierrors.IsNotFound(err):
		return nil, gone("its index configmap %s is gone", index)
	case err != nil:
		return nil, fmt.Errorf("read the index configmap %s of revision %s: %w", index, inputsHash, err)
	case !Ours(obj, inputsHash):
		return nil, gone("its index configmap %s is not one wave made", index)
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("read the index configmap %s of revision %s: got a %T", index, inputsHash, obj)
	}
	snaps, err := ParseIndex(namespace, cm.Data)
	if err != nil {
		return nil, gone("its index configmap %s: %v", index, err)
	}
	for ref, snap := range snaps {
		obj, err := api.Get(ctx, configref.Ref{Kind: ref.Kind, Namespace: namespace, Name: snap})
		switch {
		case apierrors.IsNotFound(err):
			return snaps, gone("its snapshot %s %s is gone", ref.Kind.Lower(), snap)
		case err != nil:
			return nil, fmt.Errorf("read the snapshot %s %s of revision %s: %w", ref.Kind.Lower(), snap, inputsHash, Redact(ref.Kind, err))
		case !Ours(obj, SnapshotContent(snap)):
			return snaps, gone("its snapshot %s %s is not one wave made", ref.Kind.Lower(), snap)
		}
	}
	return snaps, nil
}
