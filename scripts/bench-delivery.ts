// npm run bench -- delivery
export {}
