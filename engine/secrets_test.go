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
