package main

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/configwave/configwave/internal/build/gobuild"
)

// An SPDX 2.3 document (the JSON serialisation), with the fields a release's SBOM needs.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID                string            `json:"SPDXID"`
	Name                  string            `json:"name"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Checksums             []spdxChecksum    `json:"checksums,omitempty"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment               string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var notID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + notID.ReplaceAllString(name, "-")
}

func purl(path, version string) spdxExternalRef {
	return spdxExternalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: "pkg:golang/" + path + "@" + version}
}

// sbomOf describes the binaries in dir as Go recorded them in each: the modules linked in (a
// replaced module as its replacement), the standard library of the toolchain, and the build
// settings. What Go embeds is what the binary holds: a module needed only by tests or by
// another platform is not in it, and not listed.
func sbomOf(dir string, bins []string, version string, created time.Time) (spdxDocument, error) {
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:         "configwave-" + version,
		CreationInfo: spdxCreationInfo{Created: created.UTC().Format(time.RFC3339), Creators: []string{"Organization: configwave", "Tool: configwave-hack-release"}},
	}
	modules := map[string]spdxPackage{}
	for _, b := range bins {
		path := filepath.Join(dir, b)
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return doc, fmt.Errorf("%s: Go's build information: %w", b, err)
		}
		sum, err := sha256File(path)
		if err != nil {
			return doc, err
		}
		var settings []string
		for _, s := range info.Settings {
			switch s.Key {
			case "GOOS", "GOARCH", "CGO_ENABLED", "-trimpath", "vcs.revision", "vcs.modified":
				settings = append(settings, s.Key+"="+s.Value)
			}
		}
		id := spdxID("Package", b)
		doc.Packages = append(doc.Packages, spdxPackage{
			SPDXID: id, Name: b, VersionInfo: version, DownloadLocation: "NOASSERTION",
			Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sum}},
			PrimaryPackagePurpose: "APPLICATION",
			ExternalRefs:          []spdxExternalRef{purl(info.Main.Path, version)},
			Comment:               "built by " + info.GoVersion + " from " + info.Path + " (" + strings.Join(settings, " ") + ")",
		})
		doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", id})
		std := strings.TrimPrefix(info.GoVersion, "go")
		stdID := spdxID("Module", "stdlib@"+std)
		modules[stdID] = spdxPackage{SPDXID: stdID, Name: "stdlib", VersionInfo: std, DownloadLocation: "NOASSERTION",
			ExternalRefs: []spdxExternalRef{purl("stdlib", std)}, Comment: "the Go standard library of " + info.GoVersion}
		deps := []string{stdID}
		for _, d := range info.Deps {
			m, replaced := d, ""
			if d.Replace != nil {
				m, replaced = d.Replace, " (replaces "+d.Path+"@"+d.Version+")"
			}
			mid := spdxID("Module", m.Path+"@"+m.Version)
			p := spdxPackage{SPDXID: mid, Name: m.Path, VersionInfo: m.Version, DownloadLocation: "NOASSERTION",
				ExternalRefs: []spdxExternalRef{purl(m.Path, m.Version)}}
			if m.Sum != "" {
				p.Comment = "go.sum " + m.Sum + replaced
			}
			modules[mid] = p
			deps = append(deps, mid)
		}
		slices.Sort(deps)
		for _, d := range slices.Compact(deps) {
			doc.Relationships = append(doc.Relationships, spdxRelationship{id, "DEPENDS_ON", d})
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}
	// A namespace unique to this content, so that two builds of one version never share one.
	body, err := json.Marshal(doc)
	if err != nil {
		return doc, err
	}
	h := sha256.Sum256(body)
	doc.DocumentNamespace = "https://github.com/configwave/configwave/releases/" + version + "/sbom-" + hex.EncodeToString(h[:8])
	return doc, nil
}

// imageSBOM is the release's image archive, and the digest of each image in it by tag.
type imageSBOM struct {
	file    string
	digests map[string]string
}

func writeSBOM(ctx context.Context, o options, dir string, bins []string, image imageSBOM, name string) error {
	doc, err := sbomOf(dir, bins, o.version, gobuild.CommitTime(ctx, o.root))
	if err != nil {
		return err
	}
	if err := addImages(&doc, dir, bins, image, o.version); err != nil {
		return err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644)
}

// addImages describes the image archive: one package per image (its index digest, which a
// registry shows after a push), each containing the binaries of every platform.
func addImages(doc *spdxDocument, dir string, bins []string, image imageSBOM, version string) error {
	sum, err := sha256File(filepath.Join(dir, image.file))
	if err != nil {
		return err
	}
	archive := spdxID("Package", image.file)
	doc.Packages = append(doc.Packages, spdxPackage{SPDXID: archive, Name: image.file, VersionInfo: version, DownloadLocation: "NOASSERTION",
		Checksums: []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sum}}, PrimaryPackagePurpose: "ARCHIVE",
		Comment: "an OCI image layout (skopeo's oci-archive:) holding the images " + strings.Join(slices.Sorted(maps.Keys(image.digests)), " and ")})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", archive})
	for _, tag := range slices.Sorted(maps.Keys(image.digests)) {
		digest := image.digests[tag]
		id := spdxID("Package", "image-"+tag)
		algo, hexsum, _ := strings.Cut(digest, ":")
		doc.Packages = append(doc.Packages, spdxPackage{SPDXID: id, Name: "configwave " + tag + " image", VersionInfo: version, DownloadLocation: "NOASSERTION",
			Checksums: []spdxChecksum{{Algorithm: strings.ToUpper(algo), ChecksumValue: hexsum}}, PrimaryPackagePurpose: "CONTAINER",
			ExternalRefs: []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
				ReferenceLocator: "pkg:oci/configwave@" + strings.ReplaceAll(digest, ":", "%3A") + "?tag=" + tag}},
			Comment: "the multi-platform index tagged " + tag + " in " + image.file})
		doc.Relationships = append(doc.Relationships, spdxRelationship{archive, "CONTAINS", id})
		for _, b := range bins {
			doc.Relationships = append(doc.Relationships, spdxRelationship{id, "CONTAINS", spdxID("Package", b)})
		}
	}
	return nil
}
