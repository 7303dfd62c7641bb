//go:build !causeway_guards

package guards

// Enabled reports whether this build can turn guards off.
const Enabled = false

// Off reports whether guard g is turned off. Always false in a normal
// build.
func Off(Guard) bool { return false }
