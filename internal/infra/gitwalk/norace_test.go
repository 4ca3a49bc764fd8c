//go:build !race

package gitwalk

const raceEnabled = false
