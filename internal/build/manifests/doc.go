// Package manifests holds no code: its tests render every manifest we ship (the Kustomize
// bases under config/, the Helm chart under charts/, the examples) and apply the result with
// server-side dry-run to the real control plane, so a wrong field or API version fails
// `make test`.
package manifests
