package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRoundSpread(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name     string
		d, floor []time.Duration
		size     int
		want     Spread
	}{
		{"no full round", ms(1, 2), ms(1, 2), 3, Spread{}},
		{"one round", ms(2, 4, 6), ms(1, 2, 3), 3, Spread{Rounds: 1, Min: 2, Median: 2, Max: 2}},
		{"rounds in order, a short last one dropped", ms(10, 10, 20, 20, 30, 30, 99), ms(10, 10, 10, 10, 10, 10, 1), 2,
			Spread{Rounds: 3, Min: 1, Median: 2, Max: 3}},
		{"each round's median, not its mean", ms(10, 11, 500, 10, 10, 10), ms(10, 10, 10, 10, 10, 10), 3,
			Spread{Rounds: 2, Min: 1, Median: 1.1, Max: 1.1}},
		{"a floor of zero is skipped", ms(5, 5), ms(0, 10), 1, Spread{Rounds: 1, Min: 0.5, Median: 0.5, Max: 0.5}},
		{"rounds only where both were measured", ms(3, 3, 3, 3), ms(1, 1), 2, Spread{Rounds: 1, Min: 3, Median: 3, Max: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, roundSpread(tt.d, tt.floor, tt.size))
		})
	}
	assert.Equal(t, "-", Spread{}.String())
	assert.Equal(t, "1.05×, 1.12×, 1.30× (10 rounds)", Spread{Rounds: 10, Min: 1.05, Median: 1.12, Max: 1.3}.String())
}
