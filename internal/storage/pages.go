package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// errPages: the file's pages do not form trees that reference each page
// once.
var errPages = errors.New("the pages of the file do not form trees")

// bbolt's on-disk layout (go.etcd.io/bbolt/internal/common), in the
// machine's byte order.
const (
	pageHeaderLen   = 16 // id u64, flags u16, count u16, overflow u32
	pageElemLen     = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	pageBranch      = 0x01
	pageLeaf        = 0x02
	leafBucketEntry = 0x01
	metaRootOff     = pageHeaderLen + 16 // root bucket's root page in a meta page
	metaPgidOff     = pageHeaderLen + 40 // high-water mark
	metaTxidOff     = pageHeaderLen + 48
)

// checkPageRefs follows every page reference of the bbolt file at path
// from the root of the meta page of transaction txid, the way bbolt's
// read-write open does when it rebuilds its free list (DB.freepages,
// with NoFreelistSync): every page, with its overflow pages, must lie
// below the file's high-water mark, be referenced once, and be a branch
// or a leaf page. bbolt panics on a violation there, after it opened and
// mapped the file, and its checking goroutine goes on reading pages of
// the transaction the panic closed: a process that recovers that panic
// keeps the damaged file mapped and open, and may then crash anyway.
// Here the file is read with plain reads, and a violation is an error.
func checkPageRefs(path string, pageSize int, txid uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := pageWalker{f: f, size: pageSize, seen: make(map[uint64]bool)}
	var root uint64
	found := false
	for id := uint64(0); id < 2; id++ {
		p, err := w.read(id, 1)
		if err != nil {
			return err
		}
		if binary.NativeEndian.Uint64(p[metaTxidOff:]) == txid {
			root, w.hwm, found = binary.NativeEndian.Uint64(p[metaRootOff:]), binary.NativeEndian.Uint64(p[metaPgidOff:]), true
			break
		}
	}
	if !found {
		return fmt.Errorf("%w: no meta page holds transaction %d", errPages, txid)
	}
	return w.walk(root, 0)
}

type pageWalker struct {
	f    *os.File
	size int
	hwm  uint64
	seen map[uint64]bool
}

// read returns n pages from page id on.
func (w *pageWalker) read(id uint64, n uint64) ([]byte, error) {
	buf := make([]byte, n*uint64(w.size))
	if _, err := w.f.ReadAt(buf, int64(id)*int64(w.size)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: page %d lies beyond the end of the file", errPages, id)
		}
		return nil, err
	}
	return buf, nil
}

func (w *pageWalker) walk(id uint64, depth int) error {
	if depth > 64 {
		return fmt.Errorf("%w: page %d: the tree is deeper than 64 levels", errPages, id)
	}
	if id < 2 || id > w.hwm {
		return fmt.Errorf("%w: page %d is referenced, outside the file's pages [2, %d]", errPages, id, w.hwm)
	}
	hdr, err := w.read(id, 1)
	if err != nil {
		return err
	}
	if got := binary.NativeEndian.Uint64(hdr); got != id {
		return fmt.Errorf("%w: page %d holds the header of page %d", errPages, id, got)
	}
	flags := binary.NativeEndian.Uint16(hdr[8:])
	count := int(binary.NativeEndian.Uint16(hdr[10:]))
	overflow := uint64(binary.NativeEndian.Uint32(hdr[12:]))
	if id+overflow > w.hwm {
		return fmt.Errorf("%w: page %d and its %d overflow pages reach beyond the file's pages [2, %d]", errPages, id, overflow, w.hwm)
	}
	for i := uint64(0); i <= overflow; i++ {
		if w.seen[id+i] {
			return fmt.Errorf("%w: page %d is referenced twice", errPages, id+i)
		}
		w.seen[id+i] = true
	}
	p := hdr
	if overflow > 0 {
		if p, err = w.read(id, overflow+1); err != nil {
			return err
		}
	}
	if pageHeaderLen+count*pageElemLen > len(p) {
		return fmt.Errorf("%w: page %d lists %d elements, more than it holds", errPages, id, count)
	}
	switch flags {
	case pageBranch:
		for i := range count {
			e := p[pageHeaderLen+i*pageElemLen:]
			if err := w.walk(binary.NativeEndian.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
		}
	case pageLeaf:
		for i := range count {
			at := pageHeaderLen + i*pageElemLen
			e := p[at:]
			if binary.NativeEndian.Uint32(e)&leafBucketEntry == 0 {
				continue
			}
			pos, ksize, vsize := uint64(binary.NativeEndian.Uint32(e[4:])), uint64(binary.NativeEndian.Uint32(e[8:])), uint64(binary.NativeEndian.Uint32(e[12:]))
			v := uint64(at) + pos + ksize
			if vsize < 8 || v+8 > uint64(len(p)) {
				return fmt.Errorf("%w: page %d: element %d, a bucket, lies outside the page", errPages, id, i)
			}
			if root := binary.NativeEndian.Uint64(p[v:]); root != 0 { // 0: an inline bucket
				if err := w.walk(root, depth+1); err != nil {
					return err
				}
			}
		}
	default:
		return fmt.Errorf("%w: page %d is referenced but is no branch or leaf page (flags %#x)", errPages, id, flags)
	}
	return nil
}
