-- expect: model is missing: add model = {
return { mesh = { q = 2 } }
