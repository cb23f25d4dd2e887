package version

import (
	"runtime/debug"
	"sync"
)

var cached = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return fromBuildInfo(bi)
})

// String is npcd's version: the module version when built from a tagged
// module (go install …@v1.2.3), else the VCS revision it was built from
// (with "+dirty" for uncommitted changes), else "devel".
func String() string { return cached() }

// UserAgent is the User-Agent npcd sends to model endpoints.
func UserAgent() string { return "npcd/" + String() }

func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel-" + rev
	if modified == "true" {
		v += "+dirty"
	}
	return v
}
