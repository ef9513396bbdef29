package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRotateSecrets(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	tests := []struct {
		name  string
		old   []Secret
		grace time.Duration
		want  []Secret
	}{
		{"grace keeps the previous key until now+grace",
			[]Secret{{Key: "a"}}, day,
			[]Secret{{Key: "new"}, {Key: "a", Expires: now.Add(day)}}},
		{"zero grace drops it at once",
			[]Secret{{Key: "a"}}, 0,
			[]Secret{{Key: "new"}}},
		{"zero grace drops older keys still in their window too",
			[]Secret{{Key: "a"}, {Key: "b", Expires: now.Add(time.Hour)}}, 0,
			[]Secret{{Key: "new"}}},
		{"an older key keeps its shorter window",
			[]Secret{{Key: "a"}, {Key: "b", Expires: now.Add(time.Hour)}}, day,
			[]Secret{{Key: "new"}, {Key: "a", Expires: now.Add(day)}, {Key: "b", Expires: now.Add(time.Hour)}}},
		{"an older key never outlives the new window",
			[]Secret{{Key: "a"}, {Key: "b", Expires: now.Add(3 * day)}}, time.Hour,
			[]Secret{{Key: "new"}, {Key: "a", Expires: now.Add(time.Hour)}, {Key: "b", Expires: now.Add(time.Hour)}}},
		{"expired keys are dropped",
			[]Secret{{Key: "a"}, {Key: "b", Expires: now}, {Key: "c", Expires: now.Add(-time.Hour)}}, day,
			[]Secret{{Key: "new"}, {Key: "a", Expires: now.Add(day)}}},
		{"at most MaxOldSecrets old keys",
			[]Secret{{Key: "a"}, {Key: "b", Expires: now.Add(time.Hour)}, {Key: "c", Expires: now.Add(time.Minute)}}, day,
			[]Secret{{Key: "new"}, {Key: "a", Expires: now.Add(day)}, {Key: "b", Expires: now.Add(time.Hour)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rotateSecrets(tt.old, "new", now, tt.grace)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("rotateSecrets =\n%+v\nwant\n%+v", got, tt.want)
			}
			ep := Endpoint{Secrets: got}
			if keys := ep.SigningKeys(now.Add(tt.grace)); len(keys) != 1 || keys[0] != "new" {
				t.Errorf("after the grace window the keys are %v, want only the new one", keys)
			}
		})
	}
}

func TestNewSecret_standardFormat(t *testing.T) {
	s := NewSecret()
	if !strings.HasPrefix(s, "whsec_") || len(s) != len("whsec_")+44 {
		t.Errorf("NewSecret = %d characters %q..., want whsec_ + base64 of 32 bytes", len(s), s[:6])
	}
	if NewSecret() == s {
		t.Error("two secrets are equal")
	}
}

func TestRecordSecretReveal(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	reveal := func(i int) SecretReveal { return SecretReveal{At: t0.Add(time.Duration(i) * time.Minute), By: "admin"} }
	reveals := func(from, to int) []SecretReveal {
		var out []SecretReveal
		for i := from; i <= to; i++ {
			out = append(out, reveal(i))
		}
		return out
	}
	tests := []struct {
		name   string
		before []SecretReveal
		want   []SecretReveal
	}{
		{"the first reveal", nil, reveals(1, 1)},
		{"appended, oldest first", reveals(1, 2), reveals(1, 3)},
		{"up to MaxSecretReveals kept", reveals(1, MaxSecretReveals-1), reveals(1, MaxSecretReveals)},
		{"beyond it the oldest goes", reveals(1, MaxSecretReveals), reveals(2, MaxSecretReveals+1)},
		{"a longer list (never stored) is cut to the latest", reveals(1, MaxSecretReveals+5), reveals(7, MaxSecretReveals+6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := Endpoint{ID: "ep_1", URL: "https://example.com", Secrets: []Secret{{Key: "whsec_a"}}, SecretReveals: tt.before}
			kept := append([]SecretReveal(nil), tt.before...)
			next := tt.want[len(tt.want)-1]
			got := RecordSecretReveal(before, next)
			if !reflect.DeepEqual(got.SecretReveals, tt.want) {
				t.Errorf("SecretReveals =\n%+v\nwant\n%+v", got.SecretReveals, tt.want)
			}
			if !reflect.DeepEqual(before.SecretReveals, kept) {
				t.Error("RecordSecretReveal changed the endpoint it was given")
			}
			got.SecretReveals = before.SecretReveals
			if !reflect.DeepEqual(got, before) {
				t.Errorf("RecordSecretReveal changed more than the reveals: %+v", got)
			}
		})
	}
}
