// Package errorfs wraps a vfs.FS so that chosen operations fail, to test
// how the code above a file system handles a failing disk: a write or an
// fdatasync that returns an error, a directory that cannot be synced.
//
// Every operation is described by an Op and shown to an Injector before it
// runs; when the Injector returns an error, the operation does nothing and
// returns it (wrapping ErrInjected). OnIndex, FromIndex and Toggle are the
// usual injectors; predicates such as Writes and Syncs choose the
// operations they count.
package errorfs
