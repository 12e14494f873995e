package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// ---------------------------------------------------------------------------
// Step 2: paths

// fileRef is one field of c that names a file.
type fileRef struct {
	field string
	path  *string
	token bool   // checked with LoadToken
	what  string // what the file should hold, for errors
}

func (c *Config) fileRefs() []fileRef {
	refs := []fileRef{{"rules", &c.Rules, false, "a rule file (docs/rules.md)"}}
	refs = append(refs, c.Web.fileRefs()...)
	if e := c.Edge; e != nil {
		refs = append(refs,
			fileRef{"edge.ca_file", &e.CAFile, false, "the PEM file of the CA that signed the concentrator's certificate"},
			fileRef{"edge.token_file", &e.TokenFile, true, ""},
			fileRef{"edge.cert_file", &e.CertFile, false, "the PEM file of this edge's client certificate"},
			fileRef{"edge.key_file", &e.KeyFile, false, "the PEM file of this edge's private key"},
			fileRef{"edge.downlink_rules", &e.DownlinkRules, false, "a rule file (docs/rules.md)"},
		)
	}
	if k := c.Concentrator; k != nil {
		refs = append(refs,
			fileRef{"concentrator.cert_file", &k.CertFile, false, "the PEM file of the concentrator's certificate"},
			fileRef{"concentrator.key_file", &k.KeyFile, false, "the PEM file of the concentrator's private key"},
			fileRef{"concentrator.client_ca_file", &k.ClientCAFile, false, "the PEM file of the CA that signs edge certificates"},
		)
		for i := range k.Edges {
			refs = append(refs, fileRef{indexField("concentrator.edges", i) + ".token_file", &k.Edges[i].TokenFile, true, ""})
		}
	}
	return refs
}

// resolvePaths makes relative file and directory paths relative to the
// config file's directory.
func (c *Config) resolvePaths() {
	paths := []*string{&c.QlogDir, &c.StateDir, &c.Classify.SDP}
	for _, r := range c.fileRefs() {
		paths = append(paths, r.path)
	}
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(c.src.dir, *p)
		}
	}
}

// checkFiles reports referenced files that are missing or unreadable,
// token files that LoadToken refuses, and a qlog_dir that is not a
// directory (a missing one is created at start).
func (c *Config) checkFiles(v *configValidator) {
	if c.QlogDir != "" {
		if fi, err := os.Stat(c.QlogDir); err == nil && !fi.IsDir() {
			v.errorf("qlog_dir", "%s is not a directory; expected a directory for the qlog files", c.QlogDir)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.errorf("qlog_dir", "cannot read %s: %v; expected a directory for the qlog files", c.QlogDir, pathErrCause(err))
		}
	}
	for _, r := range c.fileRefs() {
		p := *r.path
		if p == "" {
			continue
		}
		if r.token {
			if _, err := c.LoadToken(p); err != nil {
				v.errorf(r.field, "%v", err)
			}
			continue
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			v.errorf(r.field, "%s does not exist; expected %s", p, r.what)
		case err != nil:
			v.errorf(r.field, "cannot read %s: %v; expected %s", p, pathErrCause(err), r.what)
		case fi.IsDir():
			v.errorf(r.field, "%s is a directory; expected %s", p, r.what)
		default:
			if f, err := os.Open(p); err != nil {
				v.errorf(r.field, "cannot read %s: %v; expected %s", p, pathErrCause(err), r.what)
			} else {
				f.Close()
			}
		}
	}
}
