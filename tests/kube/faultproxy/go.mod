module drasync.test/faultproxy

go 1.22
