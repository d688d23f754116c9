// npm run bench -- events
export {}
