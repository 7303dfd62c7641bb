package pending

import (
	"errors"
	"testing"
)

func TestTable(t *testing.T) {
	var tb Table[string]
	id1, ch1, err := tb.Add()
	if err != nil {
		t.Fatal(err)
	}
	id2, ch2, _ := tb.Add()
	id3, ch3, _ := tb.Add()
	if id1 == id2 || id2 == id3 || id1 == id3 {
		t.Fatalf("ids %d, %d, %d are not distinct", id1, id2, id3)
	}
	// Answers in any order; a dropped request gets none, nor does an
	// unknown or repeated id.
	tb.Drop(id3)
	tb.Deliver(id2, "two")
	tb.Deliver(id2, "again")
	tb.Deliver(id3, "late")
	tb.Deliver(999, "unknown")
	if a := <-ch2; a.Resp != "two" || a.Err != nil {
		t.Fatalf("answer to %d: %+v", id2, a)
	}
	select {
	case a := <-ch3:
		t.Fatalf("a dropped request was answered: %+v", a)
	default:
	}
	// Failing answers what still waits and refuses new requests.
	boom := errors.New("boom")
	tb.Fail(boom)
	tb.Fail(errors.New("second"))
	if a := <-ch1; !errors.Is(a.Err, boom) {
		t.Fatalf("answer to %d after the failure: %+v", id1, a)
	}
	if _, _, err := tb.Add(); !errors.Is(err, boom) {
		t.Fatalf("Add after the failure: %v, want the first error", err)
	}
	if !errors.Is(tb.Err(), boom) {
		t.Fatalf("Err = %v", tb.Err())
	}
}
