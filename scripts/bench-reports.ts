// npm run bench -- reports
export {}
