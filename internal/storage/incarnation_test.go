package storage

import "testing"

// TestSiteIncarnationPersists: a recorded site incarnation survives a
// reopen of the real bbolt file and is never replaced by another.
func TestSiteIncarnationPersists(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	if v, err := db.SiteIncarnation(); err != nil || v != 0 {
		t.Fatalf("fresh database: incarnation %x, %v", v, err)
	}
	if err := db.SetSiteIncarnation(0); err == nil {
		t.Fatal("incarnation 0 recorded")
	}
	if err := db.SetSiteIncarnation(0xfeed); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSiteIncarnation(0xfeed); err != nil {
		t.Fatalf("the same incarnation again: %v", err)
	}
	if err := db.SetSiteIncarnation(0xbeef); err == nil {
		t.Fatal("another incarnation replaced the recorded one")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, cfg)
	if v, err := db2.SiteIncarnation(); err != nil || v != 0xfeed {
		t.Fatalf("after reopen: incarnation %x, %v", v, err)
	}
}
