package fdlimit

// systemCap is 0 on Linux: the hard limit is the cap (it cannot exceed
// fs.nr_open).
func systemCap() uint64 { return 0 }
