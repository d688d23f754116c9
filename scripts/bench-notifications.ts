// npm run bench -- notifications
export {}
