package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"tagged module", debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"pseudo-version", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261123104500-abcdef123456"}}, "v0.0.0-20261123104500-abcdef123456"},
		{"checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "2364541aabbccddeeff00112233445566778899"}, {Key: "vcs.modified", Value: "false"}}}, "devel-2364541aabbc"},
		{"dirty checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "2364541"}, {Key: "vcs.modified", Value: "true"}}}, "devel-2364541+dirty"},
		{"no vcs", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(&tt.bi); got != tt.want {
				t.Errorf("fromBuildInfo = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStringAndUserAgent(t *testing.T) {
	t.Parallel()
	if String() == "" {
		t.Fatal("String is empty")
	}
	if ua := UserAgent(); !strings.HasPrefix(ua, "npcd/") || ua == "npcd/" {
		t.Errorf("UserAgent = %q, want npcd/<version>", ua)
	}
}
