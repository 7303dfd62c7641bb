//go:build causeway_guards

package guards

import (
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/raft"
)

// Enabled reports whether this build can turn guards off.
const Enabled = true

var off = parse(os.Getenv(EnvVar))

func init() {
	// hashicorp/raft (third_party/raft) cannot see this package: its
	// switch is set here.
	raft.QuietCommitWake = !off[QuietCommit]
	raft.LeaderMatchBeforeStore = off[LeaderAppend]
}

func parse(s string) map[Guard]bool {
	out := map[Guard]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		found := false
		for g, n := range names {
			if n == name {
				out[g], found = true, true
			}
		}
		if !found {
			panic(fmt.Sprintf("guards: %s names unknown guard %q", EnvVar, name))
		}
	}
	return out
}

// Off reports whether guard g is turned off by CAUSEWAY_GUARDS_OFF.
func Off(g Guard) bool { return off[g] }
