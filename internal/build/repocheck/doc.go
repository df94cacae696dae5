// Package repocheck checks the repository itself. Its Markdown: every relative link reaches a
// file of the repository, and every #anchor a heading of its page, so that moving a section
// between the README and docs/ cannot leave a reader at a dead end. Its tree: no built program
// is tracked, and every program built in the top folder is ignored by git and by the Docker
// build context. Its layering: the reloader's and wave's packages never import each other, and
// each binary links only its own side. Its figures: the README quotes bench/results.json, as
// rendered here (`make bench` and `make docs` write the block). The checks are its tests.
package repocheck
