package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat.
// It is 100 on every Linux architecture Go supports.
const clockTicks = 100

// procTree returns pid and its direct children (nginx's workers).
func procTree(pid int) []int {
	out := []int{pid}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		if pp, err := ppidOf(child); err == nil && pp == pid {
			out = append(out, child)
		}
	}
	return out
}

// statFields returns the fields of /proc/PID/stat after the command name.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, fmt.Errorf("proc stat: %w", err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("proc stat of %d: no command name", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

func ppidOf(pid int) (int, error) {
	f, err := statFields(pid)
	if err != nil || len(f) < 2 {
		return 0, fmt.Errorf("ppid of %d: %w", pid, err)
	}
	return strconv.Atoi(f[1])
}

// cpuSeconds is user+system CPU time of the processes, from field 14 and
// 15 of /proc/PID/stat (11 and 12 after the command name).
func cpuSeconds(pids []int) (float64, error) {
	var ticks uint64
	for _, pid := range pids {
		f, err := statFields(pid)
		if err != nil {
			return 0, err
		}
		if len(f) < 13 {
			return 0, fmt.Errorf("proc stat of %d: short", pid)
		}
		for _, s := range f[11:13] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("proc stat of %d: %w", pid, err)
			}
			ticks += v
		}
	}
	return float64(ticks) / clockTicks, nil
}

// peakRSSKiB sums VmHWM, the peak resident set, of the processes.
func peakRSSKiB(pids []int) (uint64, error) {
	var total uint64
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			return 0, fmt.Errorf("proc status: %w", err)
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				v, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("VmHWM of %d: %w", pid, err)
				}
				total += v
			}
		}
	}
	return total, nil
}

// resetPeakRSS sets VmHWM back to the current RSS (writing 5 to
// /proc/PID/clear_refs), so a phase's peak is its own. It reports whether
// it worked for every process.
func resetPeakRSS(pids []int) bool {
	ok := true
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0); err != nil {
			ok = false
		}
	}
	return ok
}
