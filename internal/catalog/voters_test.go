package catalog

import "testing"

func TestVotersToPromote(t *testing.T) {
	for _, tc := range []struct{ voters, candidates, limit, want int }{
		{1, 0, 3, 0},
		{1, 1, 3, 0}, // one voter and a non-voter, not two voters
		{1, 2, 3, 2}, // both at once: three
		{1, 5, 3, 2},
		{2, 1, 3, 1}, // two voters (a dead one removed): back to three
		{2, 0, 3, 0},
		{3, 4, 3, 0},
		{1, 4, 5, 4}, // five
		{1, 3, 5, 2}, // three, not four
		{3, 1, 5, 0}, // three, not four
	} {
		if got := votersToPromote(tc.voters, tc.candidates, tc.limit); got != tc.want {
			t.Errorf("votersToPromote(%d voters, %d candidates, limit %d) = %d, want %d", tc.voters, tc.candidates, tc.limit, got, tc.want)
		}
	}
}
