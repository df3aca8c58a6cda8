-- expect: the spec ran more than 10000000 Lua instructions
while true do end
