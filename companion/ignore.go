package companion

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/errors"
)

// Ignored is what IgnoreFiles did: the .gitignore it wrote to (or found
// holding every rule already) and the rules it added.
type Ignored struct {
	File    string   // the .gitignore, absolute
	Created bool     // IgnoreFiles created it
	Added   []string // the rules added, as written in File
}

// IgnoreFiles makes git ignore files, each an absolute path in project
// (the store and its log hold transcripts, which a repository must not
// take in by a careless `git add`): it adds a rule for each to the
// nearest .gitignore — in the directory of the first file, else in the
// closest directory above it up to project — each rule anchored to that
// directory ("/.claude/strata.db"), and creates a .gitignore beside the
// first file when there is none up to project. A rule the file holds
// already is not added again. A file outside project is an error.
func IgnoreFiles(project string, files ...string) (Ignored, error) {
	if len(files) == 0 {
		return Ignored{}, nil
	}
	for _, f := range files {
		if rel, err := filepath.Rel(project, f); err != nil || !filepath.IsLocal(rel) {
			return Ignored{}, errors.Wrapf(ErrOutside, "%s is not under the project %s", f, project)
		}
	}
	var out Ignored
	start := filepath.Dir(files[0])
	for dir := start; ; dir = filepath.Dir(dir) {
		if rel, err := filepath.Rel(project, dir); err != nil || !filepath.IsLocal(rel) && rel != "." {
			break
		}
		p := filepath.Join(dir, ".gitignore")
		if _, err := os.Stat(p); err == nil {
			out.File = p
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return Ignored{}, err
		}
		if dir == project || dir == filepath.Dir(dir) {
			break
		}
	}
	if out.File == "" {
		// Beside the first file, or the closest directory above it that
		// exists: the store's directory is made by the first hook.
		dir := start
		for dir != project {
			if _, err := os.Stat(dir); err == nil {
				break
			}
			dir = filepath.Dir(dir)
		}
		out.File, out.Created = filepath.Join(dir, ".gitignore"), true
	}
	text, err := os.ReadFile(out.File)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Ignored{}, err
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(text), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	base := filepath.Dir(out.File)
	var add bytes.Buffer
	for _, f := range files {
		rel, err := filepath.Rel(base, f)
		if err != nil || !filepath.IsLocal(rel) {
			return Ignored{}, errors.Wrapf(ErrOutside, "%s is not under %s", f, base)
		}
		rule := "/" + filepath.ToSlash(rel)
		if have[rule] || have[strings.TrimPrefix(rule, "/")] {
			continue
		}
		have[rule] = true
		out.Added = append(out.Added, rule)
		add.WriteString(rule + "\n")
	}
	if add.Len() == 0 {
		return out, nil
	}
	if len(text) > 0 && text[len(text)-1] != '\n' {
		text = append(text, '\n')
	}
	text = append(text, add.Bytes()...)
	return out, os.WriteFile(out.File, text, 0o644)
}
