// Package doclinks checks the project's Markdown: every relative link reaches a file of the
// repository, and every #anchor a heading of its page, so that moving a section between the
// README and docs/ cannot leave a reader at a dead end. The check is its test.
package doclinks
