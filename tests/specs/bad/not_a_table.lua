-- expect: the spec must return a table, got 42
return 42
